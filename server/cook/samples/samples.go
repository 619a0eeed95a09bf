// Package samples embeds small real time series (vega-datasets 3.2.1,
// BSD-3-Clause; the Iowa data is U.S. EIA, public domain) for the demo and
// for tests. See README.md for their shapes.
package samples

import "embed"

// FS holds iowa-electricity.csv (long form with a category column,
// annual), stocks.csv (long form, `Jan 1 2000` dates, monthly) and
// seattle-weather-hourly-normals.csv (wide form, hourly).
//
//go:embed *.csv README.md
var FS embed.FS
