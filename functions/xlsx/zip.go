package xlsx

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strconv"

	"github.com/xuri/excelize/v2"
)

// zipHook is the zip writer excelize writes the package through (File.SetZipWriter).
// It sends the package straight to the output instead of excelize's in-memory buffer,
// compresses at flate.BestSpeed (sheet XML is repetitive: little is lost, much time
// is saved), and in formulas mode edits the few parts that make the anchor cell a
// dynamic array formula, which excelize cannot write:
//
//   - the anchor cell gets cm="1" (cell metadata 1) and <f t="array" ref="A2:...">;
//   - xl/metadata.xml declares cell metadata 1 as XLDAPR with fDynamic="1";
//   - [Content_Types].xml and xl/_rels/workbook.xml.rels name that part.
//
// Without the metadata Excel would read the formula as a legacy CSE array (fixed size,
// shown in braces) or, without t="array", as an implicitly intersected =@ES.GET(...)
// that shows one value.
type zipHook struct {
	out    io.Writer
	zw     *zip.Writer
	anchor *anchorPatch // formulas mode only
	// dateAxis makes the charts' horizontal axis a date axis (daily or coarser data;
	// a date axis counts whole days, so intraday charts keep a category axis).
	dateAxis bool

	pending     string        // name of a small part held back to be edited
	pendingBody *bytes.Buffer // its content
	cur         *anchorWriter // the data sheet, while it is written in formulas mode
	failed      error
}

// anchorPatch says which cell of which part becomes the dynamic array anchor.
type anchorPatch struct {
	sheet string // zip path of the sheet
	cell  string // e.g. A2
	ref   string // the spill range at export time, e.g. A2:C124
	done  bool
}

func (h *zipHook) new(io.Writer) excelize.ZipWriter {
	h.zw = zip.NewWriter(h.out)
	h.zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestSpeed)
	})
	return h
}

func (h *zipHook) err() error { return h.failed }

func (h *zipHook) fail(err error) error {
	if h.failed == nil {
		h.failed = err
	}
	return h.failed
}

// Create implements excelize.ZipWriter.
func (h *zipHook) Create(name string) (io.Writer, error) {
	if err := h.finishEntry(); err != nil {
		return nil, err
	}
	if h.anchor != nil {
		switch name {
		case "[Content_Types].xml", "xl/_rels/workbook.xml.rels":
			h.pending, h.pendingBody = name, new(bytes.Buffer)
			return h.pendingBody, nil
		}
	}
	if chartPart.MatchString(name) {
		h.pending, h.pendingBody = name, new(bytes.Buffer)
		return h.pendingBody, nil
	}
	w, err := h.zw.Create(name)
	if err != nil {
		return nil, h.fail(err)
	}
	if h.anchor != nil && name == h.anchor.sheet {
		h.cur = &anchorWriter{w: w, p: h.anchor}
		return h.cur, nil
	}
	return w, nil
}

// AddFS implements excelize.ZipWriter.
func (h *zipHook) AddFS(fsys fs.FS) error {
	if err := h.finishEntry(); err != nil {
		return err
	}
	return h.zw.AddFS(fsys)
}

// Close implements excelize.ZipWriter: it adds the metadata part in formulas mode and
// finishes the archive.
func (h *zipHook) Close() error {
	if err := h.finishEntry(); err != nil {
		return err
	}
	if h.anchor != nil {
		if !h.anchor.done {
			return h.fail(fmt.Errorf("formula anchor %s not found in %s", h.anchor.cell, h.anchor.sheet))
		}
		w, err := h.zw.Create("xl/metadata.xml")
		if err != nil {
			return h.fail(err)
		}
		if _, err := io.WriteString(w, metadataXML); err != nil {
			return h.fail(err)
		}
	}
	if err := h.zw.Close(); err != nil {
		return h.fail(err)
	}
	return h.failed
}

// finishEntry completes the entry being written: it flushes the data sheet's patcher
// and writes a held-back part with its edit.
func (h *zipHook) finishEntry() error {
	if h.failed != nil {
		return h.failed
	}
	if h.cur != nil {
		err := h.cur.flush()
		h.cur = nil
		if err != nil {
			return h.fail(err)
		}
	}
	if h.pending == "" {
		return nil
	}
	name, body := h.pending, h.pendingBody.Bytes()
	h.pending, h.pendingBody = "", nil
	var err error
	switch name {
	case "[Content_Types].xml":
		body, err = insertBefore(body, "</Types>", `<Override PartName="/xl/metadata.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheetMetadata+xml"/>`)
	case "xl/_rels/workbook.xml.rels":
		body, err = insertBefore(body, "</Relationships>", fmt.Sprintf(
			`<Relationship Id="rId%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sheetMetadata" Target="metadata.xml"/>`,
			maxRelID(body)+1))
	default: // a chart
		body = patchChart(body, h.dateAxis)
	}
	if err != nil {
		return h.fail(fmt.Errorf("%s: %w", name, err))
	}
	w, err := h.zw.Create(name)
	if err == nil {
		_, err = w.Write(body)
	}
	if err != nil {
		return h.fail(err)
	}
	return nil
}

func insertBefore(body []byte, end, add string) ([]byte, error) {
	i := bytes.LastIndex(body, []byte(end))
	if i < 0 {
		return nil, fmt.Errorf("no %s", end)
	}
	out := make([]byte, 0, len(body)+len(add))
	out = append(out, body[:i]...)
	out = append(out, add...)
	return append(out, body[i:]...), nil
}

var chartPart = regexp.MustCompile(`^xl/charts/chart\d+\.xml$`)

// patchChart edits a chart part as excelize writes it:
//
//   - the categories (the Data sheet's date column) become a number reference:
//     excelize writes them as a string reference, which makes the dates text, so the
//     axis can be neither a date axis nor formatted as dates (it printed serials);
//   - with dateAxis, each category axis becomes a date axis counting days
//     (<dateAx> with baseTimeUnit, without the category axis' lblAlgn and
//     noMultiLvlLbl, which a date axis does not have): points sit at their dates and
//     the labels take the axis' date format.
func patchChart(b []byte, dateAxis bool) []byte {
	b = bytes.ReplaceAll(b, []byte("<cat><strRef>"), []byte("<cat><numRef>"))
	b = bytes.ReplaceAll(b, []byte("</strRef></cat>"), []byte("</numRef></cat>"))
	if !dateAxis {
		return b
	}
	b = bytes.ReplaceAll(b, []byte("<catAx>"), []byte("<dateAx>"))
	b = bytes.ReplaceAll(b, []byte("</catAx>"), []byte("</dateAx>"))
	b = bytes.ReplaceAll(b, []byte(`<lblAlgn val="ctr"></lblAlgn>`), nil)
	b = bytes.ReplaceAll(b, []byte(`<lblOffset val="100"></lblOffset><noMultiLvlLbl val="0"></noMultiLvlLbl>`),
		[]byte(`<lblOffset val="100"></lblOffset><baseTimeUnit val="days"></baseTimeUnit>`))
	return b
}

var relIDPattern = regexp.MustCompile(`Id="rId(\d+)"`)

func maxRelID(rels []byte) int {
	m := 0
	for _, s := range relIDPattern.FindAllSubmatch(rels, -1) {
		if n, err := strconv.Atoi(string(s[1])); err == nil && n > m {
			m = n
		}
	}
	return m
}

// metadataXML declares one cell metadata record: a dynamic array (XLDAPR, the
// dynamicArrayProperties extension of [MS-XLSX] with fDynamic on), which the anchor
// cell points at with cm="1".
const metadataXML = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` +
	`<metadata xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:xda="http://schemas.microsoft.com/office/spreadsheetml/2017/dynamicarray">` +
	`<metadataTypes count="1"><metadataType name="XLDAPR" minSupportedVersion="120000" copy="1" pasteAll="1" pasteValues="1" merge="1" splitFirst="1" rowColShift="1" clearFormats="1" clearComments="1" assign="1" coerce="1" cellMeta="1"/></metadataTypes>` +
	`<futureMetadata name="XLDAPR" count="1"><bk><extLst><ext uri="{bdbb8cdc-fa1e-496e-a857-3c3f30c029c3}"><xda:dynamicArrayProperties fDynamic="1" fCollapsed="0"/></ext></extLst></bk></futureMetadata>` +
	`<cellMetadata count="1"><bk><rc t="1" v="0"/></bk></cellMetadata>` +
	`</metadata>`

// anchorWriter passes the data sheet through, holding back its start until the anchor
// cell has gone by, and rewrites that cell's start tag and formula tag. excelize's
// stream writer emits the cell as <c r="A2" s="N" t="str"><f>...</f><v>...</v></c>;
// it becomes <c r="A2" s="N" cm="1"><f t="array" ref="A2:...">...</f><v>...</v></c>.
// The anchor sits right after the header row, so little is held back.
type anchorWriter struct {
	w   io.Writer
	p   *anchorPatch
	buf []byte
}

// maxHold bounds what is held back looking for the anchor (a header row of
// 1000 long ids is well below it).
const maxHold = 4 << 20

func (a *anchorWriter) Write(b []byte) (int, error) {
	if a.p.done {
		return a.w.Write(b)
	}
	a.buf = append(a.buf, b...)
	out, ok, err := patchAnchor(a.buf, a.p)
	switch {
	case err != nil:
		return 0, err
	case ok:
		a.p.done = true
		a.buf = nil
		if _, err := a.w.Write(out); err != nil {
			return 0, err
		}
	case len(a.buf) > maxHold:
		return 0, fmt.Errorf("formula anchor %s not within the first %d bytes of the sheet", a.p.cell, maxHold)
	}
	return len(b), nil
}

func (a *anchorWriter) flush() error {
	if a.p.done {
		return nil
	}
	return fmt.Errorf("formula anchor %s not found", a.p.cell)
}

// patchAnchor rewrites the anchor cell in b if b holds all of its start; ok is false
// if more bytes are needed.
func patchAnchor(b []byte, p *anchorPatch) (out []byte, ok bool, err error) {
	start := bytes.Index(b, []byte(`<c r="`+p.cell+`"`))
	if start < 0 {
		return nil, false, nil
	}
	endTag := bytes.IndexByte(b[start:], '>')
	if endTag < 0 {
		return nil, false, nil
	}
	endTag += start
	const f = "<f>"
	if len(b) < endTag+1+len(f) {
		return nil, false, nil
	}
	if !bytes.HasPrefix(b[endTag+1:], []byte(f)) {
		return nil, false, errors.New("formula anchor: unexpected cell layout")
	}
	attrs := bytes.Replace(b[start+len("<c"):endTag], []byte(` t="str"`), nil, 1)
	var o bytes.Buffer
	o.Grow(len(b) + 64)
	o.Write(b[:start])
	o.WriteString("<c")
	o.Write(attrs)
	o.WriteString(` cm="1"><f t="array" ref="` + p.ref + `">`)
	o.Write(b[endTag+1+len(f):])
	return o.Bytes(), true, nil
}
