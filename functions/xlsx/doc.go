// Package xlsx writes series to an Excel workbook (.xlsx) with excelize: what
// `es export` and the desktop app's export do. It reads through functions.Source and
// takes ES.Get's meaning from package functions (dates, per=, agg=, fill=, alignment
// on the union of dates, via Engine.Frame), so an exported sheet holds exactly what
// =ES.Get would spill. It imports only the standard library, functions and excelize;
// it knows nothing of the store, the bridge or Wails.
//
// Map of the package:
//
//   - export.go: Request, Summary, Export (to any io.Writer); prepare checks the
//     request and reads metadata and data before anything is written.
//   - file.go: ExportFile: temp file in the target directory, fsync, rename, fsync of
//     the directory; clear messages for a missing or non-directory parent, a file open
//     in Excel (Windows), a full disk. file_unix.go / file_windows.go hold the
//     platform parts.
//   - workbook.go: the Data and Info sheets.
//   - chart.go: the chart sheets, a chart per unit.
//   - zip.go: the zip writer excelize writes through: straight to the output at
//     flate.BestSpeed, plus the edits that make the formulas mode a dynamic array.
//
// # The workbook
//
// Data: a header row (Date, then one column per series, named by its id) and a row
// per date, ascending: dates as serial numbers in a date format (yyyy-mm-dd, or
// yyyy-mm-dd hh:mm when some date has a time of day), values as numbers in a format
// with thousands separators and the series' own count of decimals (the most its
// values need, at most 6, the same on every row), a column as wide as its id and
// widest value, a date without a value as an empty cell or, with fill=na, =NA().
// The rows are an Excel table (ESData) with the header row and date column frozen.
// The sheet is written with excelize's StreamWriter, which spills to a temp file past
// 16 MiB, so memory is the points read (16 bytes each), 8 bytes per date and a fixed
// amount, whatever the workbook's size: 365K cells take under 100 MB of RSS and 1M
// rows about 125 MB (BenchmarkExport, TestExportBudgets).
//
// Charts: line charts on chart sheets, one line per series (at most 255 in all,
// Excel's limit per chart). A value axis holds one unit: one unit is one sheet
// "Chart"; two units are one chart with the second on a right-hand axis; more are a
// sheet per unit ("Chart USD", ...; at most 16). The horizontal axis is a date axis
// (dates as numbers, not text) in a date format (mmm yyyy past a year, yyyy-mm-dd,
// or a category axis in yyyy-mm-dd hh:mm for intraday data, since a date axis counts
// whole days). Blanks are spanned, so an annual series among daily rows is a line.
// Axis text is dark and 10 pt; the title names the series and their units, each
// value axis its unit. zip.go edits what excelize cannot write (the date axis, dates
// as a number reference); TestChartRender renders the charts through LibreOffice.
//
// Info: a row per series (id, name, unit, frequency, source, dataset, first and last
// date and point count in the store, points exported, snapshot id and sequence number
// from Request.Provenance, and the =ES.Get formula for that series as text), then the
// export's time and options, the row count and the formula that refreshes the whole
// Data sheet: =ES.Get(Data!$B$1:$X$1, from, to, options), the ids given as the header
// range so that no id needs quoting and the 255-character limit of a text argument in
// a formula does not apply.
//
// # Live formulas (Request.Formulas)
//
// Instead of a table, Data!A2 holds one formula that returns the whole block (dates
// and every series, aligned): one call for all the series, not one per column, because
// only the union of dates is known to line up and one call is one bridge request. The
// header row stays plain text and is the formula's series argument, so editing a header
// changes the series. How it is stored, and why each part is needed:
//
//   - The function name. Excel saves a call to an Office add-in's custom function
//     (JavaScript/Office.js) as _xldudf_ followed by the namespace and the name with the
//     dot replaced by "_": ES.GET is stored as _xldudf_ES_GET(...). When the add-in has
//     registered its functions Excel shows and calculates it as =ES.GET(...). A file
//     that stores the plain text ES.GET(...) does not bind to the custom function:
//     Excel treats it as an unknown name until the formula is entered again. (XLL
//     functions are stored as _xll.NAME; Excel's own newer functions as _xlfn.NAME.)
//   - The spill. A formula that returns an array must be a dynamic array formula:
//     <c r="A2" cm="1"><f t="array" ref="A2:D37">...</f></c>, where cm="1" points into
//     xl/metadata.xml at a cell metadata record of type XLDAPR whose
//     dynamicArrayProperties have fDynamic="1" (the part is declared in
//     [Content_Types].xml and xl/_rels/workbook.xml.rels). Without cm Excel opens it as
//     a legacy Ctrl+Shift+Enter array of fixed size, shown in braces; without t="array"
//     as =@ES.GET(...), implicitly intersected to one value. excelize writes neither the
//     attribute nor the part, so zip.go adds them as the package is written.
//   - ref is the spill at export time. The cells inside it hold the exported values as
//     the formula's cached result, as Excel itself saves a spill: a reader that does not
//     calculate (openpyxl, pandas) sees the data. There is no table in this mode: a
//     dynamic array cannot spill inside a table (#SPILL!). Column A has the date format
//     as its column style, so dates spilled past the exported rows still look like dates.
//     The chart keeps the exported row range.
//   - No forced recalculation: calcPr has calcId 191029 (Excel 365's; excelize's
//     older default makes Excel recalculate everything on open) and no
//     fullCalcOnLoad. A colleague without the add-in opens the file on its cached
//     values; a recalculation there (F9 with no ES.GET registered) would turn them
//     into #NAME?, so nothing asks for one. With the add-in, the custom document
//     property RefreshProperty asks the add-in to recalculate the workbook when it
//     runs there (and to load on that document's later opens); Ctrl+Alt+F9 (or
//     editing a header) also refreshes the block; the Info sheet says so. Only values mode with
//     fill=na keeps fullCalcOnLoad, for its =NA() cells, which have no cached result
//     and are built into every spreadsheet.
//
// LibreOffice shows #NAME? across the array range whatever the file asks: it
// recalculates a formula whose function it cannot resolve (TestLibreOffice).
package xlsx
