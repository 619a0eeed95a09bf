package samples

import "github.com/energyscope/energyscope/server/cook"

// Set is one sample file and how it is cooked into a dataset.
type Set struct {
	Dataset, File string
	Opts          cook.InputOptions
}

// Sets are the three samples as `es demo` and the tests cook them:
// annual Iowa electricity (ids "Fossil Fuels", ...), monthly stock prices
// (MSFT, AMZN, IBM, GOOG, AAPL) and Seattle hourly normals (SEA.pressure,
// ...).
var Sets = []Set{
	{"iowa", "iowa-electricity.csv", cook.InputOptions{SeriesCol: "source", PeriodCol: "year", ValueCol: "net_generation", Unit: "thousand MWh", Source: "U.S. EIA", Frequency: "A"}},
	{"stocks", "stocks.csv", cook.InputOptions{SeriesCol: "symbol", PeriodCol: "date", ValueCol: "price", Unit: "USD", Source: "vega-datasets", Frequency: "M"}},
	{"seattle", "seattle-weather-hourly-normals.csv", cook.InputOptions{Wide: true, PeriodCol: "date", Prefix: "SEA.", Source: "NOAA normals", Frequency: "H"}},
}
