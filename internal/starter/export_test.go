package starter

// Judge is judge, for the external tests.
var Judge = judge
