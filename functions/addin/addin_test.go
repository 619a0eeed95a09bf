package addin

import (
	"encoding/xml"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// node is an element of manifest.xml, kept generic so the test sees the
// document as Office would: names with namespaces, attributes, order.
type node struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Children []node     `xml:",any"`
	Text     string     `xml:",chardata"`
}

func (n *node) attr(local string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

func (n *node) child(local string) *node {
	for i := range n.Children {
		if n.Children[i].XMLName.Local == local {
			return &n.Children[i]
		}
	}
	return nil
}

// path follows a chain of child names.
func (n *node) path(names ...string) *node {
	for _, name := range names {
		if n = n.child(name); n == nil {
			return nil
		}
	}
	return n
}

func (n *node) walk(fn func(*node)) {
	fn(n)
	for i := range n.Children {
		n.Children[i].walk(fn)
	}
}

const (
	nsApp      = "http://schemas.microsoft.com/office/appforoffice/1.1"
	nsBT       = "http://schemas.microsoft.com/office/officeappbasictypes/1.0"
	nsOverride = "http://schemas.microsoft.com/office/taskpaneappversionoverrides"
	nsXSI      = "http://www.w3.org/2001/XMLSchema-instance"
)

func readManifest(t *testing.T) *node {
	t.Helper()
	b, err := fs.ReadFile(FS, "manifest.xml")
	if err != nil {
		t.Fatal(err)
	}
	var root node
	if err := xml.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	return &root
}

func TestManifestStructure(t *testing.T) {
	root := readManifest(t)
	if root.XMLName.Space != nsApp || root.XMLName.Local != "OfficeApp" {
		t.Fatalf("root %v", root.XMLName)
	}
	if xsiType(root) != "TaskPaneApp" {
		t.Errorf("OfficeApp xsi:type %q", xsiType(root))
	}
	// The base manifest's elements, in the schema's order.
	order := []string{"Id", "Version", "ProviderName", "DefaultLocale", "DisplayName", "Description", "IconUrl",
		"HighResolutionIconUrl", "SupportUrl", "AppDomains", "Hosts", "Requirements", "DefaultSettings", "Permissions", "VersionOverrides"}
	var got []string
	for _, c := range root.Children {
		got = append(got, c.XMLName.Local)
	}
	if strings.Join(got, ",") != strings.Join(order, ",") {
		t.Errorf("elements\n got  %v\n want %v", got, order)
	}
	if id := root.child("Id").Text; id != ID {
		t.Errorf("Id %q, want %q", id, ID)
	}
	if v := root.child("Version").Text; strings.Count(v, ".") != 3 {
		t.Errorf("Version %q: want n.n.n.n", v)
	}
	if h := root.path("Hosts", "Host"); h == nil || h.attr("Name") != "Workbook" {
		t.Error("Hosts/Host Name=Workbook missing")
	}
	set := root.path("Requirements", "Sets", "Set")
	if set == nil || set.attr("Name") != "SharedRuntime" || set.attr("MinVersion") != "1.1" {
		t.Errorf("Requirements: want SharedRuntime 1.1, got %+v", set)
	}
	if p := root.child("Permissions").Text; p != "ReadWriteDocument" {
		t.Errorf("Permissions %q", p)
	}

	vo := root.child("VersionOverrides")
	if vo.XMLName.Space != nsOverride || xsiType(vo) != "VersionOverridesV1_0" {
		t.Errorf("VersionOverrides %v %q", vo.XMLName, xsiType(vo))
	}
	host := vo.path("Hosts", "Host")
	if host == nil || xsiType(host) != "Workbook" {
		t.Fatal("VersionOverrides/Hosts/Host xsi:type=Workbook missing")
	}
	rt := host.path("Runtimes", "Runtime")
	if rt == nil || rt.attr("lifetime") != "long" || rt.attr("resid") == "" {
		t.Fatalf("Runtime: want lifetime=long with a resid, got %+v", rt)
	}
	// The CustomFunctions extension point, complete.
	var cf *node
	if aff := host.child("AllFormFactors"); aff != nil {
		for i := range aff.Children {
			if aff.Children[i].XMLName.Local == "ExtensionPoint" && xsiType(&aff.Children[i]) == "CustomFunctions" {
				cf = &aff.Children[i]
			}
		}
	}
	if cf == nil {
		t.Fatal("AllFormFactors/ExtensionPoint xsi:type=CustomFunctions missing")
	}
	for _, p := range [][]string{{"Script", "SourceLocation"}, {"Page", "SourceLocation"}, {"Metadata", "SourceLocation"}, {"Namespace"}} {
		if n := cf.path(p...); n == nil || n.attr("resid") == "" {
			t.Errorf("CustomFunctions %s: missing or without resid", strings.Join(p, "/"))
		}
	}
	// The shared runtime: the functions' page, the task pane and the runtime are one page.
	page := cf.path("Page", "SourceLocation").attr("resid")
	if rt.attr("resid") != page {
		t.Errorf("Runtime resid %q != CustomFunctions Page %q: not a shared runtime", rt.attr("resid"), page)
	}

	// Resources: every resid resolves, ids are unique.
	res := map[string]string{}
	vo.child("Resources").walk(func(n *node) {
		if id := n.attr("id"); id != "" {
			if n.XMLName.Space != nsBT {
				t.Errorf("resource %s not in the bt namespace", id)
			}
			if _, dup := res[id]; dup {
				t.Errorf("resource id %s twice", id)
			}
			res[id] = n.attr("DefaultValue")
		}
	})
	var resids int
	root.walk(func(n *node) {
		if r := n.attr("resid"); r != "" {
			resids++
			if _, ok := res[r]; !ok {
				t.Errorf("%s resid %q does not resolve", n.XMLName.Local, r)
			}
			if len(r) > 32 {
				t.Errorf("resid %q longer than 32 characters", r)
			}
		}
	})
	if resids < 10 {
		t.Errorf("only %d resids", resids)
	}
	if ns := res[cf.child("Namespace").attr("resid")]; ns != "ES" {
		t.Errorf("namespace %q", ns)
	}
	if page != "" && !strings.HasSuffix(res[page], "/addin/taskpane.html") {
		t.Errorf("page URL %q", res[page])
	}
	if m := res[cf.path("Metadata", "SourceLocation").attr("resid")]; !strings.HasSuffix(m, "/addin/functions.json") {
		t.Errorf("metadata URL %q", m)
	}

	// Every URL is HTTPS on the bridge, and names a file the add-in has.
	root.walk(func(n *node) {
		for _, v := range append([]string{n.Text}, n.attr("DefaultValue")) {
			v = strings.TrimSpace(v)
			if !strings.Contains(v, "://") {
				continue
			}
			if !strings.HasPrefix(v, DefaultOrigin) {
				t.Errorf("%s: URL %q not on the bridge %s", n.XMLName.Local, v, DefaultOrigin)
				continue
			}
			u, err := url.Parse(v)
			if err != nil || u.Scheme != "https" {
				t.Errorf("%s: URL %q", n.XMLName.Local, v)
				continue
			}
			if u.Path == "" {
				continue // AppDomain
			}
			name := strings.TrimPrefix(u.Path, "/addin/")
			if _, err := fs.Stat(FS, name); err != nil {
				t.Errorf("%s: %q is not an add-in file", n.XMLName.Local, v)
			}
		}
	})
	// Icons: the sizes the manifest says.
	for id, v := range res {
		if strings.HasPrefix(id, "Icon.") {
			size := strings.Split(strings.TrimPrefix(id, "Icon."), "x")[0] // Icon.16x16 -> 16
			if !strings.HasSuffix(v, "icon-"+size+".png") {
				t.Errorf("%s -> %s", id, v)
			}
		}
	}
}

func xsiType(n *node) string {
	for _, a := range n.Attrs {
		if a.Name.Space == nsXSI && a.Name.Local == "type" {
			return a.Value
		}
	}
	return ""
}

// TestFunctionsJSONUpToDate regenerates functions.json from functions.js
// with custom-functions-metadata and compares.
func TestFunctionsJSONUpToDate(t *testing.T) {
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join("node_modules", "custom-functions-metadata"))
	if err != nil || modErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or node_modules missing (CI=true: scripts/install-deps.sh runs npm ci here): %v %v", err, modErr)
		}
		t.Skip("needs node and npm ci in functions/addin")
	}
	out, err := exec.Command(node, "tools/metadata.js", "functions.js", "-").Output()
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	want, err := os.ReadFile("functions.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(want) {
		t.Fatal("functions.json is out of date: run `npm run metadata` in functions/addin and commit it")
	}
}

// TestFiles: everything the manifest and the pages load is embedded.
func TestFiles(t *testing.T) {
	html, err := fs.ReadFile(FS, "taskpane.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"stub.js", "functions.js", "taskpane.js", "taskpane.css"} {
		if !strings.Contains(string(html), `"`+f+`"`) {
			t.Errorf("taskpane.html does not load %s", f)
		}
		if _, err := fs.Stat(FS, f); err != nil {
			t.Error(err)
		}
	}
	js, _ := fs.ReadFile(FS, "functions.js")
	for _, id := range []string{"GET", "LATEST", "INFO", "SEARCH", "LIVE"} {
		if !strings.Contains(string(js), "@customfunction "+id+"\n") || !strings.Contains(string(js), `CustomFunctions.associate("`+id+`"`) {
			t.Errorf("functions.js: %s not declared and associated", id)
		}
	}
	if !strings.Contains(string(js), `targetAddressSpace: "loopback"`) {
		t.Error("functions.js: fetch without targetAddressSpace")
	}
}
