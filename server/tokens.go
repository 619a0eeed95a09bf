package server

import (
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
	"time"

	"github.com/energyscope/energyscope/internal/fileutil"
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

// Tokens is the tokens file. Tokens are compared in constant time.
//
// A running server sees changes made by other processes (es token add,
// es token rm): it calls ReloadIfChanged about every tokenPoll, so a
// removed token is refused, and an added one accepted, within a second.
type Tokens struct {
	path string
	mu   sync.RWMutex // guards list and seen
	list []Token
	seen os.FileInfo // the file as last loaded (nil: missing)
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
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	for _, tk := range list {
		if len(tk.SHA256) != 64 || (tk.Scope != ScopeRead && tk.Scope != ScopeWrite) {
			return nil, nil, fmt.Errorf("tokens file %s: bad entry %q", path, tk.Name)
		}
	}
	return list, fi, nil
}

// ReloadIfChanged re-reads the tokens file if it is another file than
// the one last loaded, or its size or modification time changed. A file
// that no longer parses keeps the tokens loaded before and returns the
// error (es token writes by rename, so only a hand edit gets there); a
// deleted file leaves no token.
func (t *Tokens) ReloadIfChanged() (changed bool, err error) {
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

// reloadTokens picks up changes of the tokens file (background, every
// tokenPoll).
func (s *Server) reloadTokens() {
	if s.authOff {
		return
	}
	changed, err := s.opts.Tokens.ReloadIfChanged()
	if err != nil {
		s.log.Error("tokens file changed but cannot be read; keeping the tokens loaded before", "err", err)
	} else if changed {
		s.m.tokenReloads.Inc()
		s.log.Info("tokens reloaded", "tokens", len(s.opts.Tokens.List()))
	}
}
