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
type Tokens struct {
	path string
	mu   sync.RWMutex // guards list
	list []Token
}

// LoadTokens reads a tokens file; a missing file is an empty set.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	} else if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &t.list); err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	for _, tk := range t.list {
		if len(tk.SHA256) != 64 || (tk.Scope != ScopeRead && tk.Scope != ScopeWrite) {
			return nil, fmt.Errorf("tokens file %s: bad entry %q", path, tk.Name)
		}
	}
	return t, nil
}

// Add creates a token and returns its plain text (shown once).
func (t *Tokens) Add(name, scope string) (string, error) {
	if scope != ScopeRead && scope != ScopeWrite {
		return "", fmt.Errorf("scope must be %q or %q", ScopeRead, ScopeWrite)
	}
	if name == "" {
		return "", errors.New("a token needs a name")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tk := range t.list {
		if tk.Name == name {
			return "", fmt.Errorf("a token named %q exists; remove it first", name)
		}
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	plain := "es_" + base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(plain))
	t.list = append(t.list, Token{Name: name, SHA256: hex.EncodeToString(sum[:]), Scope: scope, Created: time.Now().UTC().Truncate(time.Second)})
	return plain, t.saveLocked()
}

// Remove deletes the named token.
func (t *Tokens) Remove(name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(t.list, func(tk Token) bool { return tk.Name == name })
	if i < 0 {
		return fmt.Errorf("no token named %q", name)
	}
	t.list = slices.Delete(t.list, i, i+1)
	return t.saveLocked()
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

func (t *Tokens) saveLocked() error {
	b, err := json.MarshalIndent(t.list, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(t.path), 0o700); err != nil {
		return err
	}
	return fileutil.WriteFile(t.path, append(b, '\n'), 0o600)
}
