package routes

import (
	"cmp"
	"slices"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// parentOutcomes collects, while MakePlan decides, what becomes of one
// object's parents: each is declined (it cannot apply), wins on some
// port, or loses on every port it names to older routes.
type parentOutcomes struct {
	o       *Object
	won     []bool
	reason  []string
	message []string
}

func newParentOutcomes(o *Object) *parentOutcomes {
	n := len(o.Parents)
	return &parentOutcomes{o: o, won: make([]bool, n), reason: make([]string, n), message: make([]string, n)}
}

func (p *parentOutcomes) decline(i int, reason gwv1.RouteConditionReason, message string) {
	p.reason[i], p.message[i] = string(reason), message
}

func (p *parentOutcomes) declineAll(reason gwv1.RouteConditionReason, message string) {
	for i := range p.o.Parents {
		p.decline(i, reason, message)
	}
}

func (p *parentOutcomes) win(i int) { p.won[i] = true }

// lose records that parent i lost a port to an older route; the first
// loss is the one reported if it wins no port.
func (p *parentOutcomes) lose(i int, message string) {
	if p.reason[i] == "" {
		p.reason[i], p.message[i] = ReasonConflicted, message
	}
}

// statuses returns the outcome of every parentRef written (not a
// TrafficSplit's apex), declined ones included, in the order written.
func (p *parentOutcomes) statuses() []ParentRefStatus {
	type indexed struct {
		index int
		ParentRefStatus
	}
	var out []indexed
	for i, parent := range p.o.Parents {
		if parent.Ref == nil {
			continue
		}
		st := ParentRefStatus{Ref: *parent.Ref, Accepted: p.won[i]}
		if !st.Accepted {
			st.Reason, st.Message = cmp.Or(p.reason[i], ReasonConflicted), p.message[i]
		}
		out = append(out, indexed{parent.Index, st})
	}
	for _, d := range p.o.Declined {
		out = append(out, indexed{d.Index, ParentRefStatus{Ref: *d.Ref, Reason: string(gwv1.RouteReasonUnsupportedValue), Message: d.Problem}})
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortStableFunc(out, func(a, b indexed) int { return cmp.Compare(a.index, b.index) })
	sts := make([]ParentRefStatus, len(out))
	for i, o := range out {
		sts[i] = o.ParentRefStatus
	}
	return sts
}
