// Package image holds no Go code: it is the grading image of
// deploy/kubernetes (Dockerfile.base, Dockerfile, build.sh) and the test
// that simulates the Kubernetes Indexed Job on the Docker engine
// (sim_test.go): the same image, one container per shard, then lab merge.
package image
