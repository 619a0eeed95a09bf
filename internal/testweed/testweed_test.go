package testweed

import (
	"context"
	"net/http"
	"testing"
)

// TestStartStop: a started server hands out catalog tokens for its
// credential and refuses a wrong one; S3 refuses anonymous requests; after
// a kill and a restart it answers on the same endpoints with its state
// (both buckets) kept.
func TestStartStop(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	if _, err := s.Token(ctx); err != nil {
		t.Fatal(err)
	}
	wrong := &Server{Catalog: s.Catalog, AccessKey: s.AccessKey, SecretKey: "not-the-secret"}
	if _, err := wrong.Token(ctx); err == nil {
		t.Fatal("the catalog gave a token for a wrong secret")
	}
	resp, err := http.Get(s.S3 + "/" + s.Bucket + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("anonymous S3 listing: %s, want 403", resp.Status)
	}
	s.Kill()
	if err := s.ready(ctx); err == nil {
		t.Fatal("ready after a kill")
	}
	s.Restart()
	if err := s.ready(ctx); err != nil {
		t.Fatalf("after restart: %v\n%s", err, s.Log())
	}
	s.Stop()
}
