package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/testpg"
	"github.com/energyscope/energyscope/server"
)

// TestAsOfForgetsWhatAnotherReplicaExpired: two replicas over one lake
// (PostgreSQL catalog, file:// warehouse). B answers an as-of read of an
// older vintage V1 (it is opened and cached). A expires V1. Once B has
// polled the lake's heads after the expiry, B's as-of read of V1 is a
// 404 naming V1, not the values of the mapping it still holds (before,
// B answered from it until its list of vintages aged out, 10 s).
func TestAsOfForgetsWhatAnotherReplicaExpired(t *testing.T) {
	pg := testpg.Start(t)
	wh := t.TempDir()
	a := startReplica(t, pg.URI, wh, server.Options{LakePoll: -1})
	b := startReplica(t, pg.URI, wh, server.Options{LakePoll: 200 * time.Millisecond})
	a.put(100)
	v1, _, _ := a.srv.Head("px")
	a.put(200)
	v2, _, _ := a.srv.Head("px")
	within(t, 10*time.Second, "B serves A's second PUT", func() bool {
		h, _, ok := b.srv.Head("px")
		return ok && h.Snapshot == v2.Snapshot
	})
	polledAfter := func(at time.Time) func() bool {
		return func() bool {
			_, h := b.health()
			return h.Replica != nil && h.Replica.LakeCheckedAt != nil && h.Replica.LakeCheckedAt.After(at)
		}
	}
	within(t, 10*time.Second, "B's poll that installed V2 is over", polledAfter(time.Now().UTC()))
	asof := "/v1/series/A?from=2026-10-01&to=2026-10-03&asof=" + v1.Snapshot
	if code, body := b.do("GET", asof, "", ""); code != 200 || !strings.Contains(body, "101") {
		t.Fatalf("B's as-of read of V1 before the expiry: %d %s", code, body)
	}

	res, err := a.l.Expire(context.Background(), "px", 1, 0)
	if err != nil || len(res.Expired) != 1 || res.Expired[0].Snapshot != v1.Snapshot {
		t.Fatalf("expire: %+v %v, want V1 %s expired", res, err, v1.Snapshot)
	}
	expired := time.Now().UTC()
	within(t, 10*time.Second, "B polls the lake's heads after the expiry", polledAfter(expired))
	code, body := b.do("GET", asof, "", "")
	if code != 404 || !strings.Contains(body, v1.Snapshot) {
		t.Fatalf("B's as-of read of V1 after A expired it: %d %s, want 404 naming %s", code, body, v1.Snapshot)
	}
	if code, body := b.do("GET", "/v1/series/A?from=2026-10-01&to=2026-10-03&asof="+v2.Snapshot, "", ""); code != 200 || !strings.Contains(body, "201") {
		t.Fatalf("B's as-of read of V2, retained: %d %s", code, body)
	}
}
