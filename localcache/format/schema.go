package format

import (
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
)

// Schema metadata keys: the "magic and version" of the Arrow files, checked
// at open on top of Arrow's own ARROW1 magic.
const (
	metaFileKey    = "energyscope.file"
	metaVersionKey = "energyscope.version"
	// fileVersion is the energyscope.version of data.arrow, index.arrow
	// and tail.parquet: unchanged since format version 1.
	fileVersion = 1
)

// Column positions in data.arrow.
const (
	DataSeries = iota
	DataPeriod
	DataValue
)

// Column positions in index.arrow.
const (
	IdxSeriesID = iota
	IdxBatch
	IdxOffset
	IdxLength
	IdxFirst
	IdxLast
	IdxLatest
	IdxFrequency
	IdxUnit
	IdxName
	IdxSource
	IdxTier
	idxColumns
)

func (p PeriodType) arrowType() arrow.DataType {
	if p == PeriodTimestamp {
		return &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}
	}
	return arrow.FixedWidthTypes.Date32
}

func fileMeta(kind string) arrow.Metadata {
	return arrow.NewMetadata([]string{metaFileKey, metaVersionKey}, []string{kind, strconv.Itoa(fileVersion)})
}

// DataSchema is the schema of data.arrow (and of the cold tier's rows).
func DataSchema(p PeriodType) *arrow.Schema {
	md := fileMeta("data")
	return arrow.NewSchema([]arrow.Field{
		{Name: "series", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "period", Type: p.arrowType()},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
	}, &md)
}

// IndexSchema is the schema of index.arrow.
func IndexSchema(p PeriodType) *arrow.Schema {
	md := fileMeta("index")
	pt := p.arrowType()
	return arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "batch", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "offset", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "length", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "first_period", Type: pt},
		{Name: "last_period", Type: pt},
		{Name: "latest_value", Type: arrow.PrimitiveTypes.Float64},
		{Name: "frequency", Type: arrow.BinaryTypes.String},
		{Name: "unit", Type: arrow.BinaryTypes.String},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "source", Type: arrow.BinaryTypes.String},
		{Name: "tier", Type: arrow.PrimitiveTypes.Uint8},
	}, &md)
}
