package client

import (
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/protocol"
)

// apply writes records through the sink and acknowledges them. A gap
// (records that do not follow the local seq) forces a resubscribe. live
// deltas of a dataset whose apply is failing are dropped (not
// acknowledged) until its retry, which subscribes again and applies the
// catch-up (catchup true).
func (s *session) apply(ds string, recs []format.Record, catchup bool) error {
	if len(recs) == 0 {
		return nil
	}
	if s.e.failing[ds] != nil && !catchup {
		return nil
	}
	_, _, seq, ok := s.e.sink.State(ds)
	if !ok {
		return nil // not installed yet; the subscribe after install catches up
	}
	i := 0
	for i < len(recs) && recs[i].Seq <= seq {
		i++
	}
	recs = recs[i:]
	if len(recs) == 0 {
		return nil
	}
	if recs[0].Seq != seq+1 {
		s.e.log.Warn("gap in deltas; resubscribing", "dataset", ds, "have", seq, "got", recs[0].Seq)
		s.caughtUp[ds] = false
		s.send(&protocol.Message{Type: protocol.TSubscribe, Subs: []protocol.Sub{s.sub(ds)}})
		return nil
	}
	if err := s.e.sink.Apply(ds, recs); err != nil {
		s.applyFailed(ds, err)
		return nil
	}
	if f := s.e.failing[ds]; f != nil {
		delete(s.e.failing, ds)
		s.e.log.Info("local apply works again", "dataset", ds, "after_attempts", f.Attempts)
	}
	last := recs[len(recs)-1].Seq
	s.e.Stats.DeltasApplied.Add(int64(len(recs)))
	s.send(&protocol.Message{Type: protocol.TAck, Dataset: ds, Seq: last})
	s.e.update(func(p *Progress, dsf func(string) *DatasetProgress) {
		d := dsf(ds)
		d.Seq = last
		if d.Failure != nil {
			d.Failure, d.State = nil, StateLive
		}
		if d.HeadSeq < last {
			d.HeadSeq = last
		}
		d.Lag = d.HeadSeq - last
		p.LastSync, d.LastSync = time.Now(), time.Now()
	})
	return nil
}

// applyFailed marks a dataset whose local apply failed and schedules its
// retry: after the backoff the engine subscribes it again from what it
// holds, and the catch-up is applied. Until then its live deltas are
// dropped; the connection and the other datasets carry on.
func (s *session) applyFailed(ds string, err error) {
	e := s.e
	e.Stats.ApplyFailures.Add(1)
	f := e.failing[ds]
	if f == nil {
		f = &ApplyError{Dataset: ds}
		e.failing[ds] = f
	}
	f.Attempts++
	f.Err = err
	delay := e.retryDelay(f.Attempts)
	f.RetryAt = time.Now().Add(delay)
	fe := *f
	s.caughtUp[ds] = false
	e.log.Warn("local apply failed; the dataset retries by itself, the others carry on", "dataset", ds, "attempt", f.Attempts, "retry_in", delay.Round(time.Millisecond), "err", err)
	e.update(func(p *Progress, dsf func(string) *DatasetProgress) {
		d := dsf(ds)
		d.State, d.Failure = StateApplyFailing, &fe
	})
	time.AfterFunc(delay, func() {
		s.send(&protocol.Message{Type: protocol.TSubscribe, Subs: []protocol.Sub{s.sub(ds)}})
	})
}
