package app

import (
	"context"
	"errors"
	"os"
	"slices"
	"time"

	"github.com/energyscope/energyscope/functions/bridge"
	"github.com/energyscope/energyscope/internal/companion"
	"github.com/energyscope/energyscope/localcache"
)

// SettingsView is bound for the Settings view: the saved settings, saving
// and applying them, and choosing the data folder.
type SettingsView struct{ *core }

// ChooseFolder asks for a folder (the home, in Settings).
func (v *SettingsView) ChooseFolder(start string) Path {
	p, err := v.runtime().OpenDirectoryDialog("Choose the data folder", start)
	if err != nil {
		return Path{Error: words(err)}
	}
	return Path{Path: p}
}

// GetSettings returns the saved settings.
func (v *SettingsView) GetSettings() Settings {
	werr := v.wait() // the active home is known once the companion started
	s, err := v.savedSettings()
	out := v.settingsDTO(s)
	if err != nil {
		out.Error = words(err)
	} else if werr != nil {
		out.Error = words(werr)
	}
	return out
}

func (c *core) settingsDTO(s companion.Settings) Settings {
	active := c.config().Home
	ds := slices.Clone(s.Datasets)
	if ds == nil {
		ds = []string{}
	}
	return Settings{
		Server: s.Server, Token: s.Token, Home: s.Home, Port: s.Port, Datasets: ds, Bandwidth: s.Bandwidth,
		File: c.settings, DefaultHome: localcache.DefaultHome(), DefaultPort: bridge.DefaultPort,
		ActiveHome: active, HomeFixed: c.opts.Home != "",
	}
}

func (c *core) savedSettings() (companion.Settings, error) {
	if c.settings == "" {
		return companion.Settings{}, errors.New("no settings folder on this computer")
	}
	s, err := companion.LoadSettings(c.settings)
	if err != nil {
		return s, err
	}
	return c.withFolder(s), nil
}

// withFolder completes the user's settings s with those of the data folder
// they open (companion.FolderSettingsPath): the server, the token and the
// datasets belong to the folder, so that --home other never syncs into a
// folder from another's server by surprise. A user settings file from before
// folder settings still holds them: they stay in effect for the folder it
// names (or the default one) until the next save moves them there, and never
// apply to a folder given by --home or ES_HOME.
func (c *core) withFolder(s companion.Settings) companion.Settings {
	path := companion.FolderSettingsPath(c.home(s))
	f, err := companion.LoadSettings(path)
	if err != nil {
		c.log.Warn("folder settings not read; working offline", "file", path, "err", err)
		return s.WithFolder(companion.Settings{})
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && c.opts.Home == "" {
		return s // the user file's own, if any
	}
	return s.WithFolder(f)
}

// save writes the folder's part of s into the data folder s opens, then the
// user's part into the user's settings file.
func (c *core) save(s companion.Settings) error {
	if c.settings == "" {
		return errors.New("no settings folder on this computer")
	}
	user, folder := s.Split()
	if err := companion.SaveSettings(companion.FolderSettingsPath(c.home(s)), folder); err != nil {
		return err
	}
	return companion.SaveSettings(c.settings, user)
}

// SaveSettings validates and saves the settings and applies them: a new
// server, token or dataset list restarts the sync; a new home, port or
// bandwidth restarts the companion.
func (v *SettingsView) SaveSettings(in Settings) Settings {
	s := companion.Settings{Server: in.Server, Token: in.Token, Home: in.Home, Port: in.Port, Datasets: in.Datasets, Bandwidth: in.Bandwidth}.Normalize()
	if err := s.Validate(); err != nil {
		out := v.settingsDTO(s)
		out.Error = words(err)
		return out
	}
	// Not before the first start has finished: it holds c.mu only once it
	// runs, and applying settings before it would start a second companion.
	if err := v.wait(); err != nil {
		out := v.settingsDTO(s)
		out.Error = words(err)
		return out
	}
	if err := v.save(s); err != nil {
		out := v.settingsDTO(s)
		out.Error = words(err)
		return out
	}
	v.mu.Lock()
	old := v.cfg
	home := v.home(s)
	msg := "Saved."
	switch {
	case v.closed:
		msg = "Saved; the app is stopping."
	case v.comp == nil || home != old.Home || s.BridgePort() != old.BridgePort() || s.Bandwidth != old.Bandwidth:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v.stopLocked(ctx)
		cancel()
		v.startLocked(s)
		msg = "Saved; restarted with the new settings."
	case s.Server != old.Server || s.Token != old.Token || !slices.Equal(s.Datasets, old.Datasets):
		v.cfg.Server, v.cfg.Token, v.cfg.Datasets = s.Server, s.Token, slices.Clone(s.Datasets)
		v.comp.SetSync(s.Server, s.Token, s.Datasets)
		msg = "Saved; sync restarted."
		if s.Server == "" {
			msg = "Saved; working offline."
		}
	}
	startErr := v.startErr
	v.mu.Unlock()
	if s.Home != "" && v.opts.Home != "" && s.Home != v.opts.Home {
		msg += " The data folder given at start (--home or ES_HOME) stays in use until the app is started without it."
	}
	out := v.settingsDTO(s)
	out.Message = msg
	if startErr != nil {
		out.Error = words(startErr)
	}
	v.runtime().EventsEmit(EventStatus)
	return out
}
