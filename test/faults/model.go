//go:build linux

package faults

import (
	"fmt"
	"hash/fnv"
	"sort"

	"github.com/anishathalye/porcupine"
)

// opMeta is the porcupine metadata of an operation: where it went and its index.
type opMeta struct {
	node  string
	index uint64
	err   string
}

func (m opMeta) String() string {
	s := m.node
	if m.index != 0 {
		s += fmt.Sprintf(" index=%d", m.index)
	}
	if m.err != "" {
		s += " err=" + m.err
	}
	return s
}

// instanceSetModel is the sequential specification of one service's instance set,
// partitioned by service. It is nondeterministic: a write with an unknown outcome may
// or may not have taken effect, so its step forks the state (the approach of etcd's
// robustness tests); later reads filter the possibilities.
func instanceSetModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionByService,
		Init:      func() []interface{} { return []interface{}{SvcState{}} },
		Step: func(state, input, output interface{}) []interface{} {
			return step(state.(SvcState), input.(Input), output.(Output))
		},
		Hash: func(state interface{}) uint64 {
			h := fnv.New64a()
			for _, v := range state.(SvcState) {
				_, _ = h.Write([]byte(v))
				_, _ = h.Write([]byte{0})
			}
			return h.Sum64()
		},
		DescribeOperation: func(input, output interface{}) string {
			return describeOp(input.(Input), output.(Output))
		},
		DescribeState: func(state interface{}) string { return state.(SvcState).String() },
		DescribeOperationMetadata: func(info interface{}) string {
			if m, ok := info.(opMeta); ok {
				return m.String()
			}
			return ""
		},
	}
	return nm.ToModel()
}

// step returns the states that can follow st after the operation, none if the
// operation's output is impossible in st.
func step(st SvcState, in Input, out Output) []interface{} {
	switch in.Kind {
	case Reset:
		return []interface{}{in.State}
	case Read:
		if out.State == st {
			return []interface{}{st}
		}
		return nil
	}
	i := in.Port - 1
	exists := st[i] != ""
	switch in.Kind {
	case Register:
		next := st
		next[i] = in.Value
		if out.Outcome == Unknown {
			return []interface{}{st, next}
		}
		return []interface{}{next}
	case Patch, Deregister:
		next := st
		if in.Kind == Patch {
			if exists {
				next[i] = in.Value
			}
		} else {
			next[i] = ""
		}
		switch out.Outcome {
		case OK:
			if exists {
				return []interface{}{next}
			}
		case NotFound:
			if !exists {
				return []interface{}{st}
			}
		case Unknown:
			if exists {
				return []interface{}{st, next}
			}
			return []interface{}{st}
		}
		return nil
	}
	return nil
}

func partitionByService(history []porcupine.Operation) [][]porcupine.Operation {
	by := map[int][]porcupine.Operation{}
	for _, op := range history {
		s := op.Input.(Input).Service
		by[s] = append(by[s], op)
	}
	keys := make([]int, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, by[k])
	}
	return out
}

func describeOp(in Input, out Output) string {
	switch in.Kind {
	case Reset:
		return fmt.Sprintf("svc%d reset %s", in.Service, in.State)
	case Read, StaleRead:
		return fmt.Sprintf("svc%d %s → %s", in.Service, in.Kind, out.State)
	case Deregister:
		return fmt.Sprintf("svc%d delete :%d → %s", in.Service, in.Port, out.Outcome)
	default:
		return fmt.Sprintf("svc%d %s :%d=%s → %s", in.Service, in.Kind, in.Port, in.Value, out.Outcome)
	}
}
