package xlsx

import (
	"fmt"
	"strings"

	"github.com/xuri/excelize/v2"
)

// Chart layout. A value axis holds one unit: series in GWh and in USD/MWh on one
// axis flatten the prices to a line at zero. So the series are grouped by unit, in
// the order their units first appear: one group is one chart; two groups are one
// chart with the second unit on a secondary (right-hand) axis; more groups are one
// chart sheet per unit ("Chart USD", "Chart MWh", ...), at most maxCharts of them.
const (
	// maxCharts bounds the chart sheets of an export; the Info sheet names the
	// units left out.
	maxCharts = 16
	// axisColor is the axis text and title colour: dark, unlike excelize's default
	// (text at 15% luminance over 85% offset, as pale as the gridlines).
	axisColor = "262626"
	axisSize  = 10
	titleSize = 13
	// markerMaxPoints: a series with at most this many points in the export gets
	// markers, so that a single point (an annual value in a short range) shows.
	markerMaxPoints = 60
)

// chartGroup is the series of one unit: column indexes into p.ids.
type chartGroup struct {
	unit string
	cols []int
}

// chartPlan is what the charts show: a sheet per entry of sheets, each with one group
// or (two units) two groups, the second on the secondary axis.
type chartPlan struct {
	sheets  []chartSheet
	charted int      // series on some chart
	dropped []string // units without a chart (more than maxCharts)
}

type chartSheet struct {
	name   string
	groups []chartGroup // one, or two: primary and secondary axis
}

// planCharts groups the series by unit. At most MaxChartSeries series are charted in
// all, the first ones, as Excel plots at most that many in one chart.
func (p *plan) planCharts() chartPlan {
	var groups []chartGroup
	index := map[string]int{}
	var cp chartPlan
	for j := range p.ids {
		if cp.charted == MaxChartSeries {
			break
		}
		u := strings.TrimSpace(p.infos[j].Unit)
		k, ok := index[u]
		if !ok {
			k = len(groups)
			index[u] = k
			groups = append(groups, chartGroup{unit: u})
		}
		groups[k].cols = append(groups[k].cols, j)
		cp.charted++
	}
	switch {
	case len(groups) <= 2:
		cp.sheets = []chartSheet{{name: ChartSheet, groups: groups}}
	default:
		used := map[string]bool{strings.ToLower(DataSheet): true, strings.ToLower(InfoSheet): true}
		for i, g := range groups {
			if i == maxCharts {
				for _, g := range groups[i:] {
					cp.dropped = append(cp.dropped, unitLabel(g.unit))
					cp.charted -= len(g.cols)
				}
				break
			}
			name := chartSheetName(g.unit, used)
			cp.sheets = append(cp.sheets, chartSheet{name: name, groups: []chartGroup{g}})
		}
	}
	return cp
}

// chartSheetName is "Chart UNIT" made a valid, unique sheet name (31 characters, no
// []:*?/\).
func chartSheetName(unit string, used map[string]bool) string {
	clean := strings.Map(func(r rune) rune {
		if strings.ContainsRune(`[]:*?/\'`, r) {
			return '_'
		}
		return r
	}, unitLabel(unit))
	base := ChartSheet + " " + clean
	if r := []rune(base); len(r) > 27 {
		base = string(r[:27])
	}
	name := base
	for n := 2; used[strings.ToLower(name)]; n++ {
		name = fmt.Sprintf("%s %d", base, n)
	}
	used[strings.ToLower(name)] = true
	return name
}

func unitLabel(u string) string {
	if u == "" {
		return "no unit"
	}
	return u
}

// addCharts adds the chart sheets of cp.
func (p *plan) addCharts(f *excelize.File, cp chartPlan) error {
	for _, s := range cp.sheets {
		charts := make([]*excelize.Chart, len(s.groups))
		for i, g := range s.groups {
			charts[i] = p.chart(g, i == 1)
		}
		charts[0].Title = p.chartTitle(s.groups)
		n := 0
		for _, g := range s.groups {
			n += len(g.cols)
		}
		if n > 20 {
			charts[0].Legend.Position = "none" // a legend of more would crowd out the plot
		}
		if err := f.AddChartSheet(s.name, charts[0], charts[1:]...); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// chart is the line chart of one group; secondary puts it on the right-hand axis of a
// combo chart.
func (p *plan) chart(g chartGroup, secondary bool) *excelize.Chart {
	last := len(p.frame.Dates) + 1
	cats := fmt.Sprintf("%s!$A$2:$A$%d", DataSheet, last)
	series := make([]excelize.ChartSeries, len(g.cols))
	for i, j := range g.cols {
		col := colName(j + 2)
		marker := excelize.ChartMarker{Symbol: "none"}
		if p.frame.Points[j] <= markerMaxPoints {
			marker = excelize.ChartMarker{Symbol: "circle", Size: 4}
		}
		series[i] = excelize.ChartSeries{
			Name:       fmt.Sprintf("%s!$%s$1", DataSheet, col),
			Categories: cats,
			Values:     fmt.Sprintf("%s!$%s$2:$%s$%d", DataSheet, col, col, last),
			Marker:     marker,
			Line:       excelize.LineOptions{Width: 1.5},
		}
	}
	font := excelize.Font{Color: axisColor, Size: axisSize}
	titleFont := &excelize.Font{Color: axisColor, Size: axisSize, Bold: true}
	c := &excelize.Chart{
		Type:   excelize.Line,
		Series: series,
		Legend: excelize.ChartLegend{Position: "bottom", Font: &excelize.Font{Color: axisColor, Size: axisSize}},
		// Span: a series with fewer dates than the sheet (annual among daily) is a
		// line through its points, not dots lost between blanks.
		ShowBlanksAs: "span",
		Dimension:    excelize.ChartDimension{Width: 960, Height: 540},
		XAxis: excelize.ChartAxis{
			Font:   font,
			NumFmt: excelize.ChartNumFmt{CustomNumFmt: p.axisDateFormat()},
		},
		YAxis: excelize.ChartAxis{
			MajorGridLines: !secondary,
			Secondary:      secondary,
			Font:           font,
		},
	}
	if p.intraday {
		// A category axis (see zipHook.dateAxis) labels every row: about a dozen labels.
		c.XAxis.TickLabelSkip = max(1, len(p.frame.Dates)/12)
	}
	if g.unit != "" {
		c.YAxis.Title = excelize.ChartTitle{Paragraph: []excelize.RichTextRun{{Text: g.unit, Font: titleFont}}}
	}
	return c
}

// axisDateFormat is the date axis' number format: months for a range of more than a
// year, days within it, hours for intraday data.
func (p *plan) axisDateFormat() string {
	n := len(p.frame.Dates)
	switch {
	case p.intraday:
		return dateTimeFormat
	case n > 0 && p.frame.Dates[n-1]-p.frame.Dates[0] > 400*86400:
		return "mmm yyyy"
	default:
		return dateFormat
	}
}

// chartTitle names the series with their units: "MSFT (USD)", "Microsoft (MSFT, USD)"
// for one series with a name, "MSFT, GOOG, IBM (USD)", and "A (USD) and B (GWh,
// right axis)" on two axes; past five series, a count.
func (p *plan) chartTitle(groups []chartGroup) excelize.ChartTitle {
	parts := make([]string, len(groups))
	total := 0
	for i, g := range groups {
		total += len(g.cols)
		var names []string
		for _, j := range g.cols {
			names = append(names, p.ids[j])
		}
		what := strings.Join(names, ", ")
		if len(g.cols) > 5 {
			what = fmt.Sprintf("%d series", len(g.cols))
		}
		unit := g.unit
		if i == 1 {
			unit = unitLabel(unit) + ", right axis"
		}
		if len(g.cols) == 1 && len(groups) == 1 {
			if name := strings.TrimSpace(p.infos[g.cols[0]].Name); name != "" && name != p.ids[g.cols[0]] {
				what = name + " (" + what
				if unit != "" {
					what += ", " + unit
				}
				parts[i] = what + ")"
				continue
			}
		}
		parts[i] = what
		if unit != "" {
			parts[i] += " (" + unit + ")"
		}
	}
	text := clipText(strings.Join(parts, " and "), 160)
	return excelize.ChartTitle{Paragraph: []excelize.RichTextRun{{Text: text,
		Font: &excelize.Font{Color: axisColor, Size: titleSize, Bold: true}}}}
}
