package main

import (
	"fmt"
	"strings"
	"time"
)

// tally adds up outcomes: one per worker, merged at the end.
type tally struct {
	elapsed time.Duration
	// byKind counts the outcomes of each kind, by class.
	byKind map[string]*[numClasses]int
	// byFault counts each injected fault and how often the client got the
	// right error for it.
	byFault map[string]*faultCount
	// unexpected counts the unexpected outcomes by kind and cause.
	unexpected map[string]*causeCount
	// okTotal is the latency of the successful requests, okTTFB the time
	// to the first event of the successful streams, faultTotal the latency
	// of the requests answered with their fault's error.
	okTotal, okTTFB, faultTotal []time.Duration
}

// faultCount is how often a fault was injected and answered as expected.
type faultCount struct {
	Want       string `json:"want"` // the expected answer (fault.want)
	Sent       int    `json:"sent"`
	AsExpected int    `json:"as_expected"`
	// Slowest is the longest any of its requests took.
	Slowest time.Duration `json:"slowest_ns"`
}

// causeCount is how often an unexpected outcome happened, with the first
// occurrence's details.
type causeCount struct {
	Count   int    `json:"count"`
	Example string `json:"example"`
}

func newTally() *tally {
	return &tally{
		byKind:     map[string]*[numClasses]int{},
		byFault:    map[string]*faultCount{},
		unexpected: map[string]*causeCount{},
	}
}

// add counts one request of kind k with fault f (nil: none) judged v.
func (t *tally) add(k *kind, f *fault, v verdict, o observation) {
	counts := t.byKind[k.name]
	if counts == nil {
		counts = new([numClasses]int)
		t.byKind[k.name] = counts
	}
	counts[v.class]++
	if f != nil {
		fc := t.faultCount(f.header, f.want())
		fc.Sent++
		fc.Slowest = max(fc.Slowest, o.total)
		if v.class == classFault || (f.recovers && v.class == classOK) {
			fc.AsExpected++
		}
	}
	switch v.class {
	case classOK:
		t.okTotal = append(t.okTotal, o.total)
		if k.stream {
			t.okTTFB = append(t.okTTFB, o.ttfb)
		}
	case classFault:
		t.faultTotal = append(t.faultTotal, o.total)
	case classUnexpected:
		key := k.name + ": " + v.cause
		c := t.unexpected[key]
		if c == nil {
			c = &causeCount{Example: o.describe()}
			t.unexpected[key] = c
		}
		c.Count++
	}
}

func (t *tally) faultCount(name, want string) *faultCount {
	fc := t.byFault[name]
	if fc == nil {
		fc = &faultCount{Want: want}
		t.byFault[name] = fc
	}
	return fc
}

// merge adds o's counts and samples to t.
func (t *tally) merge(o *tally) {
	for name, counts := range o.byKind {
		if t.byKind[name] == nil {
			t.byKind[name] = new([numClasses]int)
		}
		for c, n := range counts {
			t.byKind[name][c] += n
		}
	}
	for name, fc := range o.byFault {
		into := t.faultCount(name, fc.Want)
		into.Sent += fc.Sent
		into.AsExpected += fc.AsExpected
		into.Slowest = max(into.Slowest, fc.Slowest)
	}
	for key, c := range o.unexpected {
		if into := t.unexpected[key]; into != nil {
			into.Count += c.Count
		} else {
			t.unexpected[key] = &causeCount{Count: c.Count, Example: c.Example}
		}
	}
	t.okTotal = append(t.okTotal, o.okTotal...)
	t.okTTFB = append(t.okTTFB, o.okTTFB...)
	t.faultTotal = append(t.faultTotal, o.faultTotal...)
}

// classes counts the outcomes by class, over every kind.
func (t *tally) classes() [numClasses]int {
	var sum [numClasses]int
	for _, counts := range t.byKind {
		for c, n := range counts {
			sum[c] += n
		}
	}
	return sum
}

// requests is the number of requests sent.
func (t *tally) requests() int {
	n := 0
	for _, c := range t.classes() {
		n += c
	}
	return n
}

// describe details an observation for the report's examples.
func (o observation) describe() string {
	parts := []string{fmt.Sprintf("after %v", o.total.Round(time.Millisecond))}
	if o.status != 0 {
		parts = append(parts, fmt.Sprintf("status %d", o.status))
	}
	if o.chunks > 0 {
		parts = append(parts, fmt.Sprintf("%d chunks", o.chunks))
	}
	for _, e := range []struct {
		what string
		err  error
	}{{"transport", o.transport}, {"cut", o.cut}, {"content", o.content}} {
		if e.err != nil {
			parts = append(parts, e.what+": "+e.err.Error())
		}
	}
	return strings.Join(parts, "; ")
}
