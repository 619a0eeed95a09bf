package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/server/deltalog"
)

// Scopes a token may have. Write implies read.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
)

// TokensFile is the default name of the tokens file in a server home.
const TokensFile = "tokens.json"

// Token is a stored token: only its SHA-256 is kept.
type Token struct {
	Name    string    `json:"name"`
	SHA256  string    `json:"sha256"`
	Scope   string    `json:"scope"`
	Created time.Time `json:"created"`
}

// Tokens is the tokens file, or the shared store of several servers
// (LoadSharedTokens). Tokens are compared in constant time.
//
// A running server sees changes made by other processes (es token add,
// es token rm): it calls ReloadIfChanged about every tokenPoll, so a
// removed token is refused, and an added one accepted, within a second,
// on every server that shares the store.
type Tokens struct {
	path string
	// kv is the shared store (nil: the file at path): the list as one
	// JSON value (the file's bytes) under key SharedTokensKey, changed by
	// compare-and-swap on its revision.
	kv   *deltalog.KV
	mu   sync.RWMutex // guards list, seen and rev
	list []Token
	seen os.FileInfo // the file as last loaded (nil: missing)
	rev  uint64      // the shared value's revision as last loaded (0: none)
	// reloading: a background read of the shared store runs.
	reloading atomic.Bool
}

// Shared tokens (README "Running several servers"): a JetStream key-value
// bucket of the servers' NATS cluster, through the delta log's connection.
const (
	SharedTokensBucket = "es_tokens"
	SharedTokensKey    = "tokens"
)

// sharedTimeout bounds one read or write of the shared store.
const sharedTimeout = 5 * time.Second

// LoadSharedTokens reads the tokens of the shared store kv (the bucket
// SharedTokensBucket of the servers' NATS cluster); none yet is an empty
// set.
func LoadSharedTokens(kv *deltalog.KV) (*Tokens, error) {
	t := &Tokens{kv: kv}
	if _, err := t.ReloadIfChanged(); err != nil {
		return nil, err
	}
	return t, nil
}

// Where names the store: the file's path, or the shared bucket.
func (t *Tokens) Where() string {
	if t.kv != nil {
		return "the shared store (NATS key-value bucket " + t.kv.Bucket() + ")"
	}
	return t.path
}

// readShared reads the shared list and its revision.
func (t *Tokens) readShared() ([]Token, uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	b, rev, err := t.kv.Get(ctx, SharedTokensKey)
	if err != nil || rev == 0 {
		return nil, rev, err
	}
	list, err := parseTokens(b, t.Where())
	return list, rev, err
}

// tokenPoll is how often a server checks its tokens file for changes.
const tokenPoll = 500 * time.Millisecond

// LoadTokens reads a tokens file; a missing file is an empty set.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	list, fi, err := readTokens(path)
	if err != nil {
		return nil, err
	}
	t.list, t.seen = list, fi
	return t, nil
}

// readTokens reads and checks a tokens file (missing: none, fi nil).
func readTokens(path string) (list []Token, fi os.FileInfo, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return nil, nil, err
	}
	if list, err = parseTokens(b, "tokens file "+path); err != nil {
		return nil, nil, err
	}
	return list, fi, nil
}

// parseTokens decodes and checks a list of tokens (the file's bytes or
// the shared value) from where.
func parseTokens(b []byte, where string) (list []Token, err error) {
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	for _, tk := range list {
		if len(tk.SHA256) != 64 || (tk.Scope != ScopeRead && tk.Scope != ScopeWrite) {
			return nil, fmt.Errorf("%s: bad entry %q", where, tk.Name)
		}
	}
	return list, nil
}

// ReloadIfChanged re-reads the tokens file if it is another file than
// the one last loaded, or its size or modification time changed. A file
// that no longer parses keeps the tokens loaded before and returns the
// error (es token writes by rename, so only a hand edit gets there); a
// deleted file leaves no token.
func (t *Tokens) ReloadIfChanged() (changed bool, err error) {
	if t.kv != nil {
		return t.reloadShared()
	}
	fi, err := os.Stat(t.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	t.mu.RLock()
	same := sameFile(t.seen, fi)
	t.mu.RUnlock()
	if same {
		return false, nil
	}
	list, fi, rerr := readTokens(t.path)
	t.mu.Lock()
	defer t.mu.Unlock()
	if rerr != nil {
		t.seen = fi // do not retry (and log) until it changes again
		if t.seen == nil {
			t.seen, _ = os.Stat(t.path)
		}
		return false, rerr
	}
	t.list, t.seen = list, fi
	return true, nil
}

// reloadShared is ReloadIfChanged of the shared store: one read of the
// value (its revision tells a change). A value that does not parse keeps
// the tokens loaded before until the value changes again.
func (t *Tokens) reloadShared() (bool, error) {
	list, rev, err := t.readShared()
	t.mu.Lock()
	defer t.mu.Unlock()
	if rev == t.rev {
		return false, nil
	}
	if err != nil {
		if rev != 0 {
			t.rev = rev // do not retry (and log) until it changes again
		}
		return false, err
	}
	t.list, t.rev = list, rev
	return true, nil
}

func sameFile(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// Add creates a token and returns its plain text (shown once).
func (t *Tokens) Add(name, scope string) (string, error) {
	if scope != ScopeRead && scope != ScopeWrite {
		return "", fmt.Errorf("scope must be %q or %q", ScopeRead, ScopeWrite)
	}
	if name == "" {
		return "", errors.New("a token needs a name")
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	plain := "es_" + base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(plain))
	err := t.update(func(list []Token) ([]Token, error) {
		for _, tk := range list {
			if tk.Name == name {
				return nil, fmt.Errorf("a token named %q exists; remove it first", name)
			}
		}
		return append(list, Token{Name: name, SHA256: hex.EncodeToString(sum[:]), Scope: scope, Created: time.Now().UTC().Truncate(time.Second)}), nil
	})
	if err != nil {
		return "", err
	}
	return plain, nil
}

// Remove deletes the named token.
func (t *Tokens) Remove(name string) error {
	return t.update(func(list []Token) ([]Token, error) {
		i := slices.IndexFunc(list, func(tk Token) bool { return tk.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("no token named %q", name)
		}
		return slices.Delete(list, i, i+1), nil
	})
}

// List returns the tokens (hashes only).
func (t *Tokens) List() []Token {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Clone(t.list)
}

// Empty reports whether no token exists.
func (t *Tokens) Empty() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.list) == 0
}

// Check returns the name of the token and whether it grants scope. Every
// stored hash is compared, in constant time, whatever matches.
func (t *Tokens) Check(plain, scope string) (string, bool) {
	sum := sha256.Sum256([]byte(plain))
	got := []byte(hex.EncodeToString(sum[:]))
	t.mu.RLock()
	defer t.mu.RUnlock()
	name, ok := "", false
	for _, tk := range t.list {
		if subtle.ConstantTimeCompare(got, []byte(tk.SHA256)) == 1 {
			name = tk.Name
			ok = tk.Scope == ScopeWrite || tk.Scope == scope
		}
	}
	return name, ok
}

// update applies change to the tokens file as it is on disk now, under an
// exclusive lock on PATH.lock held across the read, the change and the
// write: two es token commands running at once (two processes) both see
// their change kept, where a read-modify-write of the list each loaded
// earlier would lose one. The lock file is left in place (removing it
// would let a third process lock a new file while the second holds the
// old one).
func (t *Tokens) update(change func([]Token) ([]Token, error)) error {
	if t.kv != nil {
		return t.updateShared(change)
	}
	if err := os.MkdirAll(filepath.Dir(t.path), 0o700); err != nil {
		return err
	}
	lf, err := os.OpenFile(t.path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close() // closing releases the lock
	if err := lockTokensFile(lf); err != nil {
		return fmt.Errorf("lock tokens file: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	list, _, err := readTokens(t.path)
	if err != nil {
		return err
	}
	list, err = change(list)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	// By rename (fileutil), so a running server never reads half a file.
	if err := fileutil.WriteFile(t.path, append(b, '\n'), 0o600); err != nil {
		return err
	}
	t.list = list
	t.seen, _ = os.Stat(t.path)
	return nil
}

// updateShared is update on the shared store: read, change, and write
// if nobody wrote in between (compare-and-swap on the revision), else
// again from the new value; two es token commands on two machines both
// keep their change.
func (t *Tokens) updateShared(change func([]Token) ([]Token, error)) error {
	for try := 0; ; try++ {
		list, rev, err := t.readShared()
		if err != nil {
			return err
		}
		if list, err = change(list); err != nil {
			return err
		}
		b, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		nrev, err := t.kv.Put(ctx, SharedTokensKey, append(b, '\n'), rev)
		cancel()
		if errors.Is(err, deltalog.ErrRevision) && try < 100 {
			continue
		}
		if err != nil {
			return err
		}
		t.mu.Lock()
		t.list, t.rev = list, nrev
		t.mu.Unlock()
		return nil
	}
}

// reloadTokens picks up changes of the tokens (background, every
// tokenPoll). A read of the shared store runs on its own goroutine (one
// at a time): a NATS cluster that does not answer must not hold the
// heartbeats up.
func (s *Server) reloadTokens() {
	if s.authOff {
		return
	}
	t := s.opts.Tokens
	if t.kv == nil {
		s.reloadTokensNow()
		return
	}
	if !t.reloading.CompareAndSwap(false, true) {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer t.reloading.Store(false)
		s.reloadTokensNow()
	}()
}

func (s *Server) reloadTokensNow() {
	changed, err := s.opts.Tokens.ReloadIfChanged()
	if err != nil {
		s.log.Error("the tokens changed but cannot be read; keeping the tokens loaded before", "store", s.opts.Tokens.Where(), "err", err)
	} else if changed {
		s.m.tokenReloads.Inc()
		s.log.Info("tokens reloaded", "tokens", len(s.opts.Tokens.List()))
	}
}
