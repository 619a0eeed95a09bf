package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/functions"
)

// refDecode is what decodeCalc must return, computed with encoding/json.
func refDecode(b []byte) ([]call, bool) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	raw, ok := m["calls"]
	if !ok {
		return nil, false
	}
	if raw == nil {
		return []call{}, true
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, false
	}
	out := make([]call, 0, len(list))
	for _, e := range list {
		var c call
		cm, ok := e.(map[string]any)
		if !ok {
			c.err = &functions.CellError{}
			out = append(out, c)
			continue
		}
		c.fn, _ = cm["fn"].(string)
		switch a := cm["args"].(type) {
		case []any:
			c.args = a
		case nil:
		default:
			c.err = &functions.CellError{}
		}
		out = append(out, c)
	}
	return out, true
}

func depth(b []byte) int {
	d, m := 0, 0
	inStr, esc := false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == '[' || c == '{'):
			d++
			m = max(m, d)
		case !inStr && (c == ']' || c == '}'):
			d--
		}
	}
	return m
}

// checkDecode holds decodeCalc against encoding/json on b.
func checkDecode(t *testing.T, b []byte) {
	got, err := decodeCalc(b, 1000)
	want, ok := refDecode(b)
	var re *RequestError
	if err != nil && !errors.As(err, &re) {
		t.Fatalf("error of type %T: %v", err, err)
	}
	if !ok {
		if err == nil {
			t.Fatalf("accepted what encoding/json refuses: %q", b)
		}
		return
	}
	if err != nil {
		if depth(b) >= maxDepth-1 || len(want) > 1000 {
			return // beyond the decoder's own limits
		}
		t.Fatalf("refused %q: %v", b, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d calls, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.fn != w.fn || (g.err == nil) != (w.err == nil) || !reflect.DeepEqual(g.args, w.args) {
			t.Fatalf("call %d of %q: got %#v, want %#v", i, b, g, w)
		}
	}
}

func TestDecodeCalc(t *testing.T) {
	for _, s := range decodeSeeds {
		checkDecode(t, []byte(s))
	}
	// Status codes.
	for _, c := range []struct {
		body string
		max  int
		want int
	}{
		{`{"calls":[{},{},{}]}`, 2, http.StatusRequestEntityTooLarge},
		{`{"calls":[{},{}]}`, 2, 0},
		{`[]`, 10, 400},
		{`{"call":[]}`, 10, 400},
		{`{"calls":{}}`, 10, 400},
		{`{"calls":[]} x`, 10, 400},
		{strings.Repeat("[", 100), 10, 400},
		{`{"calls":[{"fn":"ES.Get","args":[` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `]}]}`, 10, 400},
	} {
		_, err := decodeCalc([]byte(c.body), c.max)
		var re *RequestError
		switch {
		case c.want == 0 && err != nil:
			t.Errorf("%s: %v", c.body, err)
		case c.want != 0 && (!errors.As(err, &re) || re.Status != c.want):
			t.Errorf("%.40s: %v, want status %d", c.body, err, c.want)
		}
	}
}

var decodeSeeds = []string{
	`{"calls":[{"fn":"ES.Get","args":["MSFT","2000-01-01","2000-03-31"]}]}`,
	`{"calls":[{"fn":"ES.Get","args":[[["MSFT"],["IBM"]],36526,null,[["per=M"]],true,false,-0,1.5e-7,1E+2]}]}`,
	`{"calls":null}`,
	`{"calls":[]}`,
	` {"x":{"y":[1,{"z":null}]},"calls":[{"fn":"a","args":"b","other":[1]},3,"s",null,{"args":null}],"calls":[{"fn":"b"}]} `,
	`{"calls":[{"fn":"\u00e9\ud83d\ude00\ud800\udc00\ud800x\\\/\b\f\n\r\t","args":["\ud800\u0041","\udc00"]}]}`,
	"{\"calls\":[{\"fn\":\"\xff\xfe\",\"args\":[\"a\xc3\"]}]}",
	`{"calls":[{"fn":"ES.Get","args":[12345678901234567890,1e400]}]}`,
	`{"calls":[{"fn":"ES.Get","args":[01]}]}`,
	`{"calls":[{"fn":"ES.Get","args":[1.]}]}`,
	`{"calls":[{"fn":"ES.Get","args":[-]}]}`,
	`{"calls":[{"fn":"ES.Get","args":[1e]}]}`,
	`{"calls":[{"fn":"ES.Get","args":[1e+]}]}`,
	`{"calls":[{"fn":"ES.Get","args":[2.5E-3,-0.0e0,10.25]}]}`,
	`{"calls":[{"fn":"ES.Get","args":[1.e5]}]}`,
	`{"calls":[{"fn":"ES.Get","args":["a` + "\x01" + `"]}]}`,
	`{"calls":[{"fn":"ES.Get","args":[tru]}]}`,
	`{"calls":[{"fn":"ES.Get","args":[1,]}]}`,
	`{"calls":[{"fn":"ES.Get",}]}`,
	`{"calls":[{"fn":"ES.Get","args":[1]}`,
	`{"calls":[{"fn":"ES.Get","args":["\u12"]}]}`,
	`{"calls":[{"fn":"ES.Get","args":[{"a":1,"a":2}]}]}`,
	``,
	`null`,
}

// FuzzCalcDecode holds the /v1/calc decoder against encoding/json, then
// runs whatever it decoded through the engine and the response encoder:
// no panic, one result per call, valid and bounded JSON.
func FuzzCalcDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"calls":[{"fn":"ES.Get","args":["A,B","-1Y","today","per=W;fill=prev;last=3"]},{"fn":"ES.Info","args":[[["A",null],[2,"B"]]]},{"fn":"ES.Search","args":["a",1000]}]}`))
	f.Add([]byte(`{"calls":[{"fn":"ES.Get","args":["A","1900","9999","per=D"]},{"fn":"ES.Get","args":[[[""," ",null]]]},{"fn":"ES.Latest","args":[[[1,2],[3]],"both"]}]}`))
	eng := &functions.Engine{Src: fuzzSource{}, MaxCells: 10_000}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
		calls, err := decodeCalc(b, 1000)
		if err != nil {
			return
		}
		res := evaluate(context.Background(), eng, calls, 50_000)
		if len(res) != len(calls) {
			t.Fatalf("%d results for %d calls", len(res), len(calls))
		}
		var out, streamed bytes.Buffer
		writeResults(&out, res)
		respond(context.Background(), &streamed, eng, calls, 50_000)
		if !bytes.Equal(out.Bytes(), streamed.Bytes()) {
			t.Fatalf("respond differs from evaluate:\n%.300s\n%.300s", streamed.Bytes(), out.Bytes())
		}
		var parsed struct{ Results []json.RawMessage }
		if err := json.Unmarshal(out.Bytes(), &parsed); err != nil {
			t.Fatalf("invalid response JSON: %v", err)
		}
		if len(parsed.Results) != len(calls) {
			t.Fatalf("%d encoded results for %d calls", len(parsed.Results), len(calls))
		}
		if total := totalCells(res); total > 50_000+len(res) {
			t.Fatalf("response of %d cells past the budget", total)
		}
	})
}

// fuzzSource serves two daily series A and B of 20 years, and "2", in memory.
type fuzzSource struct{}

func (fuzzSource) series(id string) (functions.SeriesInfo, bool) {
	switch id {
	case "A", "B", "2":
		return functions.SeriesInfo{ID: id, Frequency: "D", First: 946684800, Last: 946684800 + 7300*86400, Count: 7301, LatestValue: 1.5}, true
	}
	return functions.SeriesInfo{}, false
}

func (s fuzzSource) Info(id string) (functions.SeriesInfo, error) {
	in, ok := s.series(id)
	if !ok {
		return in, functions.ErrNotFound
	}
	return in, nil
}

func (s fuzzSource) Get(id string, from, to int64) ([]int64, []float64, error) {
	in, ok := s.series(id)
	if !ok {
		return nil, nil, functions.ErrNotFound
	}
	var p []int64
	var v []float64
	for t := max(from, in.First); t <= min(to, in.Last); t += 86400 {
		t0 := t - (t-in.First)%86400
		if t0 < from {
			continue
		}
		p = append(p, t0)
		v = append(v, math.Sin(float64(t0)/1e6))
	}
	return p, v, nil
}

func (s fuzzSource) Search(q string, limit int) ([]functions.SeriesInfo, error) {
	var out []functions.SeriesInfo
	for _, id := range []string{"A", "B", "2"} {
		if strings.Contains(id, q) && len(out) < limit {
			in, _ := s.series(id)
			out = append(out, in)
		}
	}
	return out, nil
}

// TestEncodeMatchesEncodingJSON: the hand-written response is what
// encoding/json writes for the same values.
func TestEncodeMatchesEncodingJSON(t *testing.T) {
	ce := &functions.CellError{Code: "#N/A", Message: "a \"quoted\" <tag> & \u2028 \x01 \xff é"}
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e-7, 1e-6, 123456.789, 1e20, 1e21, 1.7976931348623157e308, 5e-324, -2.5e-10, 36526, 999999999999999, 1e15, 4503599627370497}
	row := []any{}
	for _, f := range floats {
		row = append(row, f)
	}
	res := []functions.Result{
		{Value: [][]any{row}},
		{Value: [][]any{{"plain", "tab\there", "nul\x00", "emoji 😀", "bad \xc3(", nil, true, false, ce, ce}}},
		{Err: ce},
		{Value: [][]any{{math.NaN(), math.Inf(1)}}},
	}
	type jerr struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	type jcellErr struct {
		Error jerr `json:"error"`
	}
	type jres struct {
		Value [][]any `json:"value,omitempty"`
		Error *jerr   `json:"error,omitempty"`
	}
	var want struct {
		Results []jres `json:"results"`
	}
	for _, r := range res {
		if r.Err != nil {
			want.Results = append(want.Results, jres{Error: &jerr{r.Err.Code, r.Err.Message}})
			continue
		}
		var v [][]any
		for _, row := range r.Value {
			var o []any
			for _, c := range row {
				switch x := c.(type) {
				case *functions.CellError:
					o = append(o, jcellErr{jerr{x.Code, x.Message}})
				case float64:
					if math.IsNaN(x) || math.IsInf(x, 0) {
						o = append(o, nil)
					} else {
						o = append(o, x)
					}
				default:
					o = append(o, x)
				}
			}
			v = append(v, o)
		}
		want.Results = append(want.Results, jres{Value: v})
	}
	var wb bytes.Buffer
	enc := json.NewEncoder(&wb)
	enc.SetEscapeHTML(false)
	enc.Encode(want)
	var gb bytes.Buffer
	writeResults(&gb, res)
	if gb.String() != wb.String() {
		t.Fatalf("got\n%s\nwant\n%s", gb.String(), wb.String())
	}
	// The same cells as Grids, as the engine gives them.
	for i := range res {
		if res[i].Value != nil {
			res[i] = functions.Result{Grid: toGrid(res[i].Value)}
		}
	}
	gb.Reset()
	writeResults(&gb, res)
	if gb.String() != wb.String() {
		t.Fatalf("grid: got\n%s\nwant\n%s", gb.String(), wb.String())
	}
}

// toGrid lays rows of boxed cells out as a Grid.
func toGrid(v [][]any) *functions.Grid {
	g := &functions.Grid{Rows: len(v), Cols: len(v[0])}
	for _, row := range v {
		for _, c := range row {
			x := math.NaN()
			switch c := c.(type) {
			case float64:
				x = c
			case nil:
			default:
				if g.Other == nil {
					g.Other = make([]any, g.Rows*g.Cols)
				}
				g.Other[len(g.Num)] = c
			}
			g.Num = append(g.Num, x)
		}
	}
	return g
}

// TestEvaluateBudget: a batch whose results exceed the cell budget answers
// the calls that fit, in order, and #NUM! from the first that does not,
// whatever the concurrency: respond, which streams big batches over
// workers, writes exactly what the one-at-a-time evaluate gives.
func TestEvaluateBudget(t *testing.T) {
	eng := &functions.Engine{Src: fuzzSource{}}
	var calls []call
	for i := range 500 {
		switch {
		case i == 300:
			calls = append(calls, call{fn: "ES.Get", args: []any{"A"}}) // 7301 x 2 cells
		case i%97 == 5:
			calls = append(calls, call{fn: "ES.Get", args: []any{"B", "2010-01-01", "2010-01-20"}}) // 20 x 2
		case i%89 == 7:
			calls = append(calls, call{err: &functions.CellError{Code: functions.CodeValue, Message: "args: want an array"}})
		default:
			calls = append(calls, call{fn: "ES.Latest", args: []any{"B"}})
		}
	}
	ctx := context.Background()
	for _, maxCells := range []int{1000, 300, 64, 1, 100_000} {
		res := evaluate(ctx, eng, calls, maxCells)
		if maxCells == 1000 {
			for i, r := range res {
				over := r.Err != nil && r.Err.Code == functions.CodeNum
				if over != (i >= 300) {
					t.Fatalf("call %d: %+v", i, r)
				}
			}
		}
		var want bytes.Buffer
		writeResults(&want, res)
		for range 20 {
			var got bytes.Buffer
			respond(ctx, &got, eng, calls, maxCells)
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("budget %d: respond differs from evaluate:\n%.400s\n%.400s", maxCells, got.Bytes(), want.Bytes())
			}
		}
	}
	// A cancelled request answers #N/A for what it did not reach.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	res := evaluate(cctx, eng, calls, 1_000_000)
	if res[0].Err == nil || !strings.Contains(res[0].Err.Message, "too long") {
		t.Fatalf("cancelled: %+v", res[0])
	}
	var got bytes.Buffer
	respond(cctx, &got, eng, calls, 1_000_000)
	var parsed calcResponse
	if err := json.Unmarshal(got.Bytes(), &parsed); err != nil || len(parsed.Results) != len(calls) {
		t.Fatalf("cancelled respond: %v, %d results", err, len(parsed.Results))
	}
	for i, r := range parsed.Results {
		if r.Error == nil || !strings.Contains(r.Error.Message, "too long") {
			t.Fatalf("cancelled respond, call %d: %+v", i, r)
		}
	}
}

// TestLimits: body size, calls per request and cells per response, against
// a running bridge.
func TestLimits(t *testing.T) {
	b := startBridge(t, sampleHome(t), func(o *Options) {
		o.MaxBody = 4096
		o.MaxCalls = 20
		o.MaxBatchCells = 300
	})
	big := `{"calls":[{"fn":"ES.Latest","args":["` + strings.Repeat("x", 5000) + `"]}]}`
	resp, out := b.do(t, "POST", "/v1/calc", []byte(big), b.auth())
	if resp.StatusCode != 413 || !strings.Contains(string(out), "larger than 4096 bytes") {
		t.Errorf("big body: %d %s", resp.StatusCode, out)
	}
	many := `{"calls":[` + strings.TrimSuffix(strings.Repeat(`{"fn":"ES.Latest","args":["MSFT"]},`, 21), ",") + `]}`
	resp, out = b.do(t, "POST", "/v1/calc", []byte(many), b.auth())
	if resp.StatusCode != 413 || !strings.Contains(string(out), "at most 20") {
		t.Errorf("many calls: %d %s", resp.StatusCode, out)
	}
	resp, out = b.do(t, "POST", "/v1/calc", []byte(`{"calls":[{"fn":`), b.auth())
	if resp.StatusCode != 400 {
		t.Errorf("bad JSON: %d %s", resp.StatusCode, out)
	}
	// MSFT is 123 rows x 2 cells; the second one passes the budget of 300.
	r := b.calc(t, `{"calls":[{"fn":"ES.Get","args":["MSFT"]},{"fn":"ES.Latest","args":["MSFT"]},{"fn":"ES.Get","args":["MSFT"]},{"fn":"ES.Latest","args":["MSFT"]}]}`)
	if r.Results[0].Error != nil || r.Results[1].Error != nil || r.Results[2].Error == nil || r.Results[2].Error.Code != "#NUM!" || r.Results[3].Error == nil {
		t.Errorf("budget: %s", mustJSON(t, r))
	}
	// The engine's own per-call bound follows the budget.
	r = b.calc(t, `{"calls":[{"fn":"ES.Get","args":["SEA.temperature"]}]}`)
	if r.Results[0].Error == nil || r.Results[0].Error.Code != "#NUM!" {
		t.Errorf("per-call bound: %s", mustJSON(t, r))
	}
}

// TestAppendFloat holds appendFloat against encoding/json on decimals and
// random floats.
func TestAppendFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	check := func(f float64) {
		want, err := json.Marshal(f)
		if err != nil {
			return
		}
		if got := appendFloat(nil, f); string(got) != string(want) {
			t.Fatalf("%v (%b): got %s, want %s", f, math.Float64bits(f), got, want)
		}
	}
	for range 200_000 {
		k := rng.IntN(6)
		n := rng.Int64N(2_000_000_000_000) - 1_000_000_000_000
		check(float64(n) / math.Pow10(k))
		check(float64(rng.Int64N(100_000)-50_000) / math.Pow10(k))
		check(math.Float64frombits(rng.Uint64()))
		check(rng.NormFloat64() * math.Pow10(rng.IntN(30)-10))
	}
	for _, f := range []float64{0.1, 0.2, 0.3, 1.1, 2.675, 1e-4, 9.9999e-5, 999999999.9999, 1e9 - 0.01, 0.0001, 0.00015, 123.45, -0.05, 0.30000000000000004, 1e15 - 1, -(1e15 - 1), 1e15 + 2} {
		check(f)
	}
	for _, n := range []uint64{0, 9, 10, 99, 100, 101, 999, 1000, 36526, math.MaxUint64, math.MaxUint64 / 3} {
		if got, want := string(appendUint(nil, n)), strconv.FormatUint(n, 10); got != want {
			t.Fatalf("appendUint(%d) = %s", n, got)
		}
	}
	for range 100_000 {
		n := rng.Uint64() >> rng.IntN(64)
		if got, want := string(appendUint(nil, n)), strconv.FormatUint(n, 10); got != want {
			t.Fatalf("appendUint(%d) = %s", n, got)
		}
	}
}

// BenchmarkDecodeCalc: the request of the 10,000-call ES.Latest batch.
func BenchmarkDecodeCalc(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"calls":[`)
	for i := range 10_000 {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"fn":"ES.Latest","args":["PET.EMM_EPM0_PTE_NUS_DPG.W.` + strings.Repeat("x", i%7) + `"]}`)
	}
	buf.WriteString(`]}`)
	body := buf.Bytes()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := decodeCalc(body, DefaultMaxCalls); err != nil {
			b.Fatal(err)
		}
	}
}
