package app

// Runtime is the part of the Wails runtime the app calls: events to the
// frontend, the clipboard and the native file dialogs. The desktop build
// wraps Wails' runtime package (wails.go, build tag desktop); tests use
// their own. Wails' functions log.Fatal when called with a context that
// Wails did not create, hence this seam.
type Runtime interface {
	// EventsEmit sends an event to the frontend (runtime.EventsOn there).
	EventsEmit(name string, data ...any)
	// ClipboardSetText puts text on the system clipboard.
	ClipboardSetText(text string) error
	// SaveFileDialog asks where to save a file; "" means cancelled.
	SaveFileDialog(title, dir, name string) (string, error)
	// OpenDirectoryDialog asks for a folder; "" means cancelled.
	OpenDirectoryDialog(title, dir string) (string, error)
}

// nopRuntime is the runtime before the window exists: events go nowhere
// and dialogs are cancelled.
type nopRuntime struct{}

func (nopRuntime) EventsEmit(string, ...any)                             {}
func (nopRuntime) ClipboardSetText(string) error                         { return errNoWindow }
func (nopRuntime) SaveFileDialog(string, string, string) (string, error) { return "", nil }
func (nopRuntime) OpenDirectoryDialog(string, string) (string, error)    { return "", nil }
