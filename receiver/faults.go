package receiver

import (
	"fmt"
	"slices"
)

// Faults are the misbehaviours a lab step switches on to prove that a sender
// classifies each kind of answer correctly (CONTRACT §5).
type Faults struct {
	// FailNext answers the next N POST /orders 503 before touching any order.
	FailNext int `json:"fail_next"`
	// RejectIDs are answered 422, the permanent-failure answer.
	RejectIDs []string `json:"reject_ids"`
	// LooseAck, "1" or "ok", replaces the JSON true of successful answers, so
	// a sender that accepts truthy acks is caught.
	LooseAck string `json:"loose_ack"`
	// HoldNext commits the next N new orders and then never answers them, to
	// model a receiver that recorded the effect but whose reply was lost.
	HoldNext int `json:"hold_next"`
}

// maxFaultCount bounds the counters so a typo cannot wedge a lab for hours.
const maxFaultCount = 1000000

// Validate refuses fault modes outside CONTRACT §5 (ErrInvalid): the
// receiver's start checks them with its other flags, before the file's
// directory (§6.codes puts an invalid value before a missing directory).
func (f Faults) Validate() error {
	if f.FailNext < 0 || f.FailNext > maxFaultCount {
		return fmt.Errorf("%w: fail_next must be from 0 to %d", ErrInvalid, maxFaultCount)
	}
	if f.HoldNext < 0 || f.HoldNext > maxFaultCount {
		return fmt.Errorf("%w: hold_next must be from 0 to %d", ErrInvalid, maxFaultCount)
	}
	switch f.LooseAck {
	case "", "1", "ok":
	default:
		return fmt.Errorf("%w: loose_ack must be \"1\", \"ok\" or \"\"", ErrInvalid)
	}
	for _, id := range f.RejectIDs {
		if !ValidID(id) {
			return fmt.Errorf("%w: reject id %q is not a valid order id", ErrInvalid, id)
		}
	}
	return nil
}

// normalized returns a copy that shares no memory with f, with reject ids
// sorted and deduplicated so the /faults answer is stable.
func (f Faults) normalized() Faults {
	ids := slices.Clone(f.RejectIDs)
	slices.Sort(ids)
	f.RejectIDs = slices.Compact(ids)
	if f.RejectIDs == nil {
		f.RejectIDs = []string{}
	}
	return f
}

// ack is the value of "ack" in a successful answer under these faults.
func (f Faults) ack() any {
	switch f.LooseAck {
	case "1":
		return 1
	case "ok":
		return "ok"
	}
	return true
}

// faultsPatch is a POST /faults body: absent fields leave a mode unchanged.
type faultsPatch struct {
	FailNext  *int      `json:"fail_next"`
	RejectIDs *[]string `json:"reject_ids"`
	LooseAck  *string   `json:"loose_ack"`
	HoldNext  *int      `json:"hold_next"`
}

func (p faultsPatch) apply(f Faults) Faults {
	if p.FailNext != nil {
		f.FailNext = *p.FailNext
	}
	if p.RejectIDs != nil {
		f.RejectIDs = *p.RejectIDs
	}
	if p.LooseAck != nil {
		f.LooseAck = *p.LooseAck
	}
	if p.HoldNext != nil {
		f.HoldNext = *p.HoldNext
	}
	return f
}

// SetFaults replaces every fault mode at once; it is what --fail-next and
// friends feed at start-up and what tests use instead of HTTP.
func (r *Receiver) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = f.normalized()
	return nil
}

// Faults returns a copy of the fault modes in force.
func (r *Receiver) Faults() Faults {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.faults.normalized()
}

// takeFail consumes one fail_next credit, if any.
func (r *Receiver) takeFail() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.faults.FailNext == 0 {
		return false
	}
	r.faults.FailNext--
	return true
}

// takeHold consumes one hold_next credit, if any.
func (r *Receiver) takeHold() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.faults.HoldNext == 0 {
		return false
	}
	r.faults.HoldNext--
	return true
}

func (r *Receiver) rejects(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.faults.RejectIDs, id)
}

func (r *Receiver) ack() any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.faults.ack()
}
