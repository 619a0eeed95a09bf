package synth

// Vocabulary for plausible EIA / IEA / ENTSO-E style series ids and names.
// Codes follow the shape of the real catalogues; the combinations are random.

type code struct{ c, n string }

var states = []code{
	{"AL", "Alabama"}, {"AK", "Alaska"}, {"AZ", "Arizona"}, {"AR", "Arkansas"}, {"CA", "California"},
	{"CO", "Colorado"}, {"CT", "Connecticut"}, {"DE", "Delaware"}, {"DC", "District of Columbia"},
	{"FL", "Florida"}, {"GA", "Georgia"}, {"HI", "Hawaii"}, {"ID", "Idaho"}, {"IL", "Illinois"},
	{"IN", "Indiana"}, {"IA", "Iowa"}, {"KS", "Kansas"}, {"KY", "Kentucky"}, {"LA", "Louisiana"},
	{"ME", "Maine"}, {"MD", "Maryland"}, {"MA", "Massachusetts"}, {"MI", "Michigan"}, {"MN", "Minnesota"},
	{"MS", "Mississippi"}, {"MO", "Missouri"}, {"MT", "Montana"}, {"NE", "Nebraska"}, {"NV", "Nevada"},
	{"NH", "New Hampshire"}, {"NJ", "New Jersey"}, {"NM", "New Mexico"}, {"NY", "New York"},
	{"NC", "North Carolina"}, {"ND", "North Dakota"}, {"OH", "Ohio"}, {"OK", "Oklahoma"}, {"OR", "Oregon"},
	{"PA", "Pennsylvania"}, {"RI", "Rhode Island"}, {"SC", "South Carolina"}, {"SD", "South Dakota"},
	{"TN", "Tennessee"}, {"TX", "Texas"}, {"UT", "Utah"}, {"VT", "Vermont"}, {"VA", "Virginia"},
	{"WA", "Washington"}, {"WV", "West Virginia"}, {"WI", "Wisconsin"}, {"WY", "Wyoming"},
}

// Petroleum areas: U.S., PADDs and named hubs/cities.
var petAreas = []code{
	{"NUS", "U.S."}, {"R10", "East Coast (PADD 1)"}, {"R1X", "New England (PADD 1A)"},
	{"R1Y", "Central Atlantic (PADD 1B)"}, {"R1Z", "Lower Atlantic (PADD 1C)"}, {"R20", "Midwest (PADD 2)"},
	{"R30", "Gulf Coast (PADD 3)"}, {"R40", "Rocky Mountain (PADD 4)"}, {"R50", "West Coast (PADD 5)"},
	{"R5XCA", "West Coast (PADD 5) Except California"}, {"Y35NY", "New York Harbor"}, {"Y44HO", "Houston, TX"},
	{"YCUOK", "Cushing, OK"}, {"Y05LA", "Los Angeles, CA"}, {"Y05SF", "San Francisco, CA"},
	{"Y48SE", "Seattle, WA"}, {"YBOS", "Boston, MA"}, {"YCLE", "Cleveland, OH"}, {"YDEN", "Denver, CO"},
	{"YMIA", "Miami, FL"}, {"YORD", "Chicago, IL"}, {"Y10MT", "Mont Belvieu, TX"}, {"YLGC", "U.S. Gulf Coast"},
}

var petProducts = []struct {
	c, n  string
	crude bool
}{
	{"EPMRU", "Regular Gasoline", false}, {"EPMMU", "Midgrade Gasoline", false},
	{"EPMPU", "Premium Gasoline", false}, {"EPM0", "Total Gasoline", false},
	{"EPMRR", "Reformulated Regular Gasoline", false}, {"EPMRCG", "Conventional Regular Gasoline", false},
	{"EPD2D", "No 2 Diesel", false}, {"EPD2DXL0", "Ultra Low Sulfur No 2 Diesel", false},
	{"EPJK", "Kerosene-Type Jet Fuel", false}, {"EPC0", "Crude Oil", true},
	{"EPCWTI", "WTI Crude Oil", true}, {"EPCBRENT", "Brent Crude Oil", true},
	{"EPLLPA", "Propane", false}, {"EPPR", "Residual Fuel Oil", false},
	{"EPD2F", "No 2 Heating Oil", false}, {"EPPK", "Kerosene", false},
	{"EPOOXE", "Fuel Ethanol", false}, {"EPPO6", "Other Oils", false},
}

var petPriceProcs = []code{
	{"PTE", "Retail Prices"}, {"PF4", "Spot Price FOB"}, {"PWG", "Wholesale/Resale Price"},
	{"PRS", "Rack Price"}, {"PTC", "Sales to End Users Price"}, {"PDR", "Refiner Dealer Tank Wagon Price"},
}

var petCrudePriceProcs = []code{
	{"PF4", "Spot Price FOB"}, {"PDP", "Domestic First Purchase Price"}, {"PLD", "Landed Cost"},
	{"PRF", "Refiner Acquisition Cost"},
}

var petVolProcs = []code{
	{"FPF", "Field Production"}, {"SAX", "Ending Stocks"}, {"IM0", "Imports"}, {"EEX", "Exports"},
	{"YIR", "Refiner Net Input"}, {"YPR", "Refiner and Blender Net Production"},
	{"VPP", "Product Supplied"}, {"SKA", "Stocks at Tank Farms and Pipelines"}, {"NRI", "Net Receipts"},
}

var petPricePrefix = []string{"EMM", "EER", "EMA", "EPP"}

// Well-known short petroleum codes.
var petShortDaily = []struct{ c, n, unit string }{
	{"RWTC", "Cushing, OK WTI Spot Price FOB", "$/bbl"},
	{"RBRTE", "Europe Brent Spot Price FOB", "$/bbl"},
	{"RCLC1", "Cushing, OK Crude Oil Future Contract 1", "$/bbl"},
	{"RCLC2", "Cushing, OK Crude Oil Future Contract 2", "$/bbl"},
	{"RCLC3", "Cushing, OK Crude Oil Future Contract 3", "$/bbl"},
	{"RCLC4", "Cushing, OK Crude Oil Future Contract 4", "$/bbl"},
	{"EER_EPMRU_PF4_Y35NY_DPG", "New York Harbor Conventional Gasoline Regular Spot Price FOB", "$/gal"},
	{"EER_EPMRU_PF4_RGC_DPG", "U.S. Gulf Coast Conventional Gasoline Regular Spot Price FOB", "$/gal"},
	{"EER_EPD2DXL0_PF4_RGC_DPG", "U.S. Gulf Coast Ultra-Low Sulfur No 2 Diesel Spot Price", "$/gal"},
	{"EER_EPJK_PF4_RGC_DPG", "U.S. Gulf Coast Kerosene-Type Jet Fuel Spot Price FOB", "$/gal"},
	{"EER_EPLLPA_PF4_Y44MB_DPG", "Mont Belvieu, TX Propane Spot Price FOB", "$/gal"},
	{"EER_EPD2F_PF4_Y35NY_DPG", "New York Harbor No. 2 Heating Oil Spot Price FOB", "$/gal"},
	{"EMM_EPMRU_PTE_NUS_DPG", "U.S. Regular Gasoline Retail Prices", "$/gal"},
}

var petShortProds = []code{
	{"CR", "Crude Oil"}, {"CE", "Commercial Crude Oil"}, {"GF", "Finished Motor Gasoline"},
	{"DI", "Distillate Fuel Oil"}, {"KJ", "Kerosene-Type Jet Fuel"}, {"RE", "Residual Fuel Oil"},
	{"PR", "Propane/Propylene"}, {"TT", "Total Petroleum"}, {"GR", "Reformulated Motor Gasoline"},
}

var petShortProcs = []struct {
	c, n  string
	stock bool
}{
	{"FP", "Field Production", false}, {"ST", "Ending Stocks", true}, {"IM", "Imports", false},
	{"EX", "Exports", false}, {"UP", "Product Supplied", false}, {"RI", "Refiner Net Input", false},
	{"NP", "Refiner and Blender Net Production", false},
}

var petShortAreas = []code{
	{"US", "U.S."}, {"P1", "East Coast (PADD 1)"}, {"P2", "Midwest (PADD 2)"}, {"P3", "Gulf Coast (PADD 3)"},
	{"P4", "Rocky Mountain (PADD 4)"}, {"P5", "West Coast (PADD 5)"},
}

// Natural gas N-codes: code, measure, whether a price variant (digit 3) exists.
var ngCodes = []struct {
	c, n  string
	price bool
}{
	{"3010", "Residential Consumption", true}, {"3020", "Commercial Consumption", true},
	{"3035", "Industrial Consumption", true}, {"3045", "Vehicle Fuel Consumption", true},
	{"3050", "Electric Power Consumption", true}, {"3060", "Total Consumption", false},
	{"9010", "Gross Withdrawals", false}, {"9050", "Marketed Production", false},
	{"9070", "Dry Production", false}, {"9100", "Imports", true}, {"9130", "Exports", true},
	{"5030", "Underground Storage Volume", false}, {"5050", "Underground Storage Injections", false},
	{"5060", "Underground Storage Withdrawals", false}, {"1160", "Lease Fuel Consumption", false},
	{"9102", "Pipeline Imports", true}, {"9103", "LNG Imports", true}, {"9132", "Pipeline Exports", true},
	{"9133", "LNG Exports", true}, {"3025", "Citygate Deliveries", true},
}

var ngHubs = []code{
	{"WHHD", "Henry Hub"}, {"CHCG", "Chicago Citygate"}, {"SOCL", "SoCal Citygate"},
	{"WAHA", "Waha Hub"}, {"ALGQ", "Algonquin Citygate"}, {"TZ6N", "Transco Zone 6 NY"},
	{"DOMS", "Dominion South"}, {"OPAL", "Opal Hub"}, {"MALN", "Malin"}, {"PGEC", "PG&E Citygate"},
	{"SUMS", "Sumas"}, {"NGPL", "NGPL Midcontinent"}, {"KATY", "Katy Hub"}, {"CARR", "Carthage Hub"},
	{"TETM", "Texas Eastern M-3"}, {"LEBN", "Lebanon Hub"}, {"VENT", "Ventura"}, {"DAWN", "Dawn Ontario"},
	{"C1", "Natural Gas Futures Contract 1"}, {"C2", "Natural Gas Futures Contract 2"},
	{"C3", "Natural Gas Futures Contract 3"}, {"C4", "Natural Gas Futures Contract 4"},
}

var ngStorageRegions = []code{
	{"R48", "Lower 48 States"}, {"R31", "East Region"}, {"R32", "Midwest Region"},
	{"R33", "South Central Region"}, {"R34", "Mountain Region"}, {"R35", "Pacific Region"},
	{"R36", "Salt Region"}, {"R37", "Nonsalt Region"},
}

var elecFuels = []code{
	{"ALL", "all fuels"}, {"COW", "coal"}, {"NG", "natural gas"}, {"NUC", "nuclear"},
	{"HYC", "conventional hydroelectric"}, {"WND", "wind"}, {"SUN", "all solar"}, {"PEL", "petroleum liquids"},
	{"GEO", "geothermal"}, {"WWW", "wood and wood-derived fuels"}, {"BIO", "other biomass"},
	{"HPS", "hydro-electric pumped storage"}, {"TSN", "small-scale solar photovoltaic"}, {"OTH", "other"},
}

var elecSectors = []code{
	{"99", "all sectors"}, {"1", "electric utility"}, {"94", "independent power producers"},
	{"96", "all commercial"}, {"97", "all industrial"}, {"98", "electric power"},
}

var elecRegions = []code{
	{"US", "United States"}, {"NEW", "New England"}, {"MAT", "Middle Atlantic"}, {"ENC", "East North Central"},
	{"WNC", "West North Central"}, {"SAT", "South Atlantic"}, {"ESC", "East South Central"},
	{"WSC", "West South Central"}, {"MTN", "Mountain"}, {"PCC", "Pacific Contiguous"}, {"PCN", "Pacific Noncontiguous"},
}

var elecMeasures = []struct{ c, n, unit string }{
	{"GEN", "Net generation", "thousand MWh"},
	{"CONS_EG_BTU", "Consumption for electricity generation (Btu)", "billion Btu"},
	{"COST_BTU", "Average cost of fossil fuel for electricity generation (per Btu)", "$/MMBtu"},
	{"RECEIPTS_BTU", "Receipts of fossil fuel by electricity plants (Btu)", "billion Btu"},
}

var elecRetailSectors = []code{
	{"RES", "residential"}, {"COM", "commercial"}, {"IND", "industrial"}, {"TRA", "transportation"},
	{"ALL", "all sectors"}, {"OTH", "other"},
}

var plantFuels = []struct {
	c, n string
	pms  []code
}{
	{"ALL", "all fuels", []code{{"ALL", "all primemovers"}}},
	{"NG", "natural gas", []code{{"ALL", "all primemovers"}, {"CT", "combined cycle combustion turbine part"},
		{"CA", "combined cycle steam part"}, {"GT", "gas turbine"}, {"ST", "steam turbine"},
		{"IC", "internal combustion"}, {"CS", "combined cycle single shaft"}}},
	{"BIT", "bituminous coal", []code{{"ALL", "all primemovers"}, {"ST", "steam turbine"}}},
	{"SUB", "subbituminous coal", []code{{"ALL", "all primemovers"}, {"ST", "steam turbine"}}},
	{"LIG", "lignite coal", []code{{"ALL", "all primemovers"}, {"ST", "steam turbine"}}},
	{"NUC", "nuclear", []code{{"ALL", "all primemovers"}, {"ST", "steam turbine"}}},
	{"WAT", "conventional hydroelectric", []code{{"ALL", "all primemovers"}, {"HY", "hydraulic turbine"}}},
	{"WND", "wind", []code{{"ALL", "all primemovers"}, {"WT", "wind turbine"}}},
	{"SUN", "solar", []code{{"ALL", "all primemovers"}, {"PV", "photovoltaic"}, {"BA", "battery storage"}}},
	{"DFO", "distillate fuel oil", []code{{"ALL", "all primemovers"}, {"IC", "internal combustion"},
		{"GT", "gas turbine"}, {"ST", "steam turbine"}}},
	{"RFO", "residual fuel oil", []code{{"ALL", "all primemovers"}, {"ST", "steam turbine"}}},
	{"WDS", "wood waste solids", []code{{"ALL", "all primemovers"}, {"ST", "steam turbine"}}},
	{"GEO", "geothermal", []code{{"ALL", "all primemovers"}, {"ST", "steam turbine"}, {"BT", "binary cycle turbine"}}},
	{"LFG", "landfill gas", []code{{"ALL", "all primemovers"}, {"IC", "internal combustion"}, {"GT", "gas turbine"}}},
	{"MSW", "municipal solid waste", []code{{"ALL", "all primemovers"}, {"ST", "steam turbine"}}},
}

var plantMeasures = []struct{ c, n, unit string }{
	{"GEN", "Net generation", "MWh"},
	{"CONS_TOT", "Total consumption", "MMBtu"},
	{"CONS_EG", "Consumption for electricity generation", "MMBtu"},
}

var placeNames = []string{
	"Barry", "Big Bend", "Cumberland", "Gibson", "Monroe", "Rockport", "Scherer", "Bowen", "Navajo",
	"Palo Verde", "Comanche", "Martin Lake", "Parish", "Diablo Canyon", "Grand Coulee", "Chief Joseph",
	"Robert Moses", "Hoover", "Intermountain", "Colstrip", "Jim Bridger", "Craig", "Sherburne County",
	"Belle River", "Amos", "Mitchell", "Gavin", "Sammis", "Homer City", "Keystone", "Conemaugh",
	"Brunner Island", "Salem", "Hope Creek", "Oyster Creek", "Indian River", "Turkey Point", "St. Lucie",
	"Crystal River", "Crist", "Plant Vogtle", "Oconee", "Catawba", "McGuire", "Brunswick", "Harris",
	"Surry", "North Anna", "Calvert Cliffs", "Peach Bottom", "Limerick", "Susquehanna", "Ginna",
	"Nine Mile Point", "Fitzpatrick", "Seabrook", "Millstone", "Pilgrim", "Kewaunee", "Point Beach",
	"Prairie Island", "Monticello", "Fort Calhoun", "Wolf Creek", "Callaway", "Cooper", "Arkansas Nuclear",
	"Waterford", "River Bend", "Grand Gulf", "Watts Bar", "Sequoyah", "Browns Ferry", "Farley", "Hatch",
	"Desert Sunlight", "Topaz", "Solar Star", "Alta", "Horse Hollow", "Roscoe", "Shepherds Flat",
	"Meadow Lake", "Fowler Ridge", "Tehachapi", "Altamont", "Buffalo Gap", "Sweetwater", "Capricorn Ridge",
	"Elk River", "Red Hawk", "Clear Lake", "Oak Creek", "Pine Bluff", "Cedar Bay", "Lake Road", "Riverside",
}

var plantKinds = []string{
	"Power Plant", "Generating Station", "Energy Center", "Steam Plant", "Power Station",
	"Solar Project", "Wind Farm", "Dam", "Combined Cycle", "Cogeneration", "Peaking Plant",
}

var intlProducts = []struct {
	c, n  string
	units []code
}{
	{"57", "Crude oil including lease condensate", []code{{"TBPD", "MBBL/D"}}},
	{"5", "Petroleum and other liquids", []code{{"TBPD", "MBBL/D"}, {"QBTU", "quad Btu"}}},
	{"53", "Refined petroleum products", []code{{"TBPD", "MBBL/D"}}},
	{"54", "Motor gasoline", []code{{"TBPD", "MBBL/D"}}},
	{"55", "Jet fuel", []code{{"TBPD", "MBBL/D"}}},
	{"56", "Distillate fuel oil", []code{{"TBPD", "MBBL/D"}}},
	{"26", "Natural gas", []code{{"BCF", "Bcf"}, {"QBTU", "quad Btu"}}},
	{"3", "Dry natural gas", []code{{"BCF", "Bcf"}, {"QBTU", "quad Btu"}}},
	{"7", "Coal", []code{{"MST", "thousand short tons"}, {"QBTU", "quad Btu"}}},
	{"2", "Electricity", []code{{"BKWH", "billion kWh"}, {"MK", "million kW"}}},
	{"44", "Total energy", []code{{"QBTU", "quad Btu"}}},
	{"4008", "Carbon dioxide emissions", []code{{"MMTCD", "MMtonnes CO2"}}},
	{"29", "Renewables", []code{{"BKWH", "billion kWh"}, {"QBTU", "quad Btu"}}},
	{"27", "Nuclear", []code{{"BKWH", "billion kWh"}, {"MK", "million kW"}}},
}

var intlActivities = []code{
	{"1", "production"}, {"2", "consumption"}, {"3", "imports"}, {"4", "exports"},
	{"5", "reserves"}, {"7", "capacity"}, {"12", "generation"}, {"33", "refinery output"},
}

var countries = []code{
	{"WORL", "World"}, {"OECD", "OECD"}, {"NOAM", "North America"}, {"CSAM", "Central and South America"},
	{"EURO", "Europe"}, {"EURA", "Eurasia"}, {"MIDE", "Middle East"}, {"AFRC", "Africa"}, {"ASOC", "Asia and Oceania"},
	{"USA", "United States"}, {"CAN", "Canada"}, {"MEX", "Mexico"}, {"BRA", "Brazil"}, {"ARG", "Argentina"},
	{"COL", "Colombia"}, {"VEN", "Venezuela"}, {"ECU", "Ecuador"}, {"PER", "Peru"}, {"CHL", "Chile"},
	{"TTO", "Trinidad and Tobago"}, {"GBR", "United Kingdom"}, {"NOR", "Norway"}, {"DEU", "Germany"},
	{"FRA", "France"}, {"ITA", "Italy"}, {"ESP", "Spain"}, {"NLD", "Netherlands"}, {"BEL", "Belgium"},
	{"POL", "Poland"}, {"SWE", "Sweden"}, {"FIN", "Finland"}, {"DNK", "Denmark"}, {"AUT", "Austria"},
	{"CHE", "Switzerland"}, {"CZE", "Czechia"}, {"HUN", "Hungary"}, {"ROU", "Romania"}, {"GRC", "Greece"},
	{"PRT", "Portugal"}, {"IRL", "Ireland"}, {"TUR", "Turkiye"}, {"UKR", "Ukraine"}, {"RUS", "Russia"},
	{"KAZ", "Kazakhstan"}, {"AZE", "Azerbaijan"}, {"TKM", "Turkmenistan"}, {"UZB", "Uzbekistan"},
	{"SAU", "Saudi Arabia"}, {"IRN", "Iran"}, {"IRQ", "Iraq"}, {"KWT", "Kuwait"}, {"ARE", "United Arab Emirates"},
	{"QAT", "Qatar"}, {"OMN", "Oman"}, {"BHR", "Bahrain"}, {"ISR", "Israel"}, {"EGY", "Egypt"},
	{"DZA", "Algeria"}, {"LBY", "Libya"}, {"NGA", "Nigeria"}, {"AGO", "Angola"}, {"GAB", "Gabon"},
	{"COG", "Congo-Brazzaville"}, {"ZAF", "South Africa"}, {"MOZ", "Mozambique"}, {"CHN", "China"},
	{"IND", "India"}, {"JPN", "Japan"}, {"KOR", "South Korea"}, {"TWN", "Taiwan"}, {"IDN", "Indonesia"},
	{"MYS", "Malaysia"}, {"THA", "Thailand"}, {"VNM", "Vietnam"}, {"PHL", "Philippines"}, {"AUS", "Australia"},
	{"NZL", "New Zealand"}, {"PAK", "Pakistan"}, {"BGD", "Bangladesh"}, {"SGP", "Singapore"},
	{"BRN", "Brunei"}, {"MMR", "Burma"},
}

var sedsSources = []struct{ c, n, phys string }{
	{"TE", "Total energy", "billion Btu"}, {"NG", "Natural gas", "MMcf"}, {"CL", "Coal", "thousand short tons"},
	{"PA", "All petroleum products", "thousand barrels"}, {"ES", "Electricity sales", "million kWh"},
	{"RE", "Renewable energy", "billion Btu"}, {"NU", "Nuclear energy", "million kWh"},
	{"HY", "Hydroelectricity", "million kWh"}, {"WY", "Wind energy", "million kWh"},
	{"SO", "Solar energy", "million kWh"}, {"MG", "Motor gasoline", "thousand barrels"},
	{"DF", "Distillate fuel oil", "thousand barrels"}, {"JF", "Jet fuel", "thousand barrels"},
	{"LG", "Liquefied petroleum gases", "thousand barrels"}, {"EM", "Fuel ethanol", "thousand barrels"},
}

var sedsSectors = []code{
	{"TC", "total"}, {"RC", "residential"}, {"CC", "commercial"}, {"IC", "industrial"},
	{"AC", "transportation"}, {"EI", "electric power"},
}

var sedsUnits = []struct{ c, n, unit string }{
	{"B", "consumption", "billion Btu"}, {"P", "consumption", ""},
	{"D", "average price", "$/MMBtu"}, {"V", "expenditures", "million dollars"},
}

var steoCodes = []struct{ c, n, unit string }{
	{"PAPR", "Total petroleum and other liquids production", "MBBL/D"},
	{"PATC", "Total petroleum and other liquids consumption", "MBBL/D"},
	{"COPR", "Crude oil production", "MBBL/D"},
	{"NGPR", "Natural gas production", "Bcf"},
	{"NGTC", "Natural gas consumption", "Bcf"},
	{"WTIPUUS", "West Texas Intermediate crude oil price", "$/bbl"},
	{"BREPUUS", "Brent crude oil spot price", "$/bbl"},
	{"NGHHUUS", "Henry Hub natural gas spot price", "$/MMBtu"},
	{"MGRARUS", "Regular gasoline retail price", "$/gal"},
	{"ELEPGEN", "Total electricity generation", "thousand MWh"},
	{"PASC", "Commercial inventory of petroleum", "thousand barrels"},
}

var steoRegions = []code{
	{"WORLD", "World"}, {"US", "U.S."}, {"OPEC", "OPEC"}, {"NONOPEC", "Non-OPEC"}, {"CA", "Canada"},
	{"MX", "Mexico"}, {"BR", "Brazil"}, {"NO", "Norway"}, {"RU", "Russia"}, {"CH", "China"},
	{"SA", "Saudi Arabia"}, {"OECD", "OECD"}, {"NONOECD", "Non-OECD"},
}

var balancingAuthorities = []code{
	{"CISO", "California Independent System Operator"}, {"ERCO", "Electric Reliability Council of Texas, Inc."},
	{"PJM", "PJM Interconnection, LLC"}, {"MISO", "Midcontinent Independent System Operator, Inc."},
	{"NYIS", "New York Independent System Operator"}, {"ISNE", "ISO New England"},
	{"SWPP", "Southwest Power Pool"}, {"BPAT", "Bonneville Power Administration"},
	{"TVA", "Tennessee Valley Authority"}, {"SOCO", "Southern Company Services, Inc. - Trans"},
	{"DUK", "Duke Energy Carolinas"}, {"FPL", "Florida Power & Light Co."}, {"PACE", "PacifiCorp East"},
	{"PACW", "PacifiCorp West"}, {"AZPS", "Arizona Public Service Company"}, {"SRP", "Salt River Project"},
	{"LDWP", "Los Angeles Department of Water and Power"}, {"PSCO", "Public Service Company of Colorado"},
	{"NEVP", "Nevada Power Company"}, {"IPCO", "Idaho Power Company"}, {"FPC", "Duke Energy Florida, Inc."},
	{"CPLE", "Duke Energy Progress East"}, {"SCEG", "Dominion Energy South Carolina, Inc."},
	{"TEPC", "Tucson Electric Power"}, {"PNM", "Public Service Company of New Mexico"},
	{"BANC", "Balancing Authority of Northern California"}, {"TIDC", "Turlock Irrigation District"},
	{"WACM", "Western Area Power Administration - Rocky Mountain Region"}, {"AECI", "Associated Electric Cooperative, Inc."},
	{"LGEE", "Louisville Gas and Electric Company and Kentucky Utilities Company"},
}

var ebaMeasures = []code{
	{"D", "Demand"}, {"NG", "Net generation"}, {"TI", "Total net actual interchange"}, {"DF", "Day-ahead demand forecast"},
	{"NG.COL", "Net generation from coal"}, {"NG.NG", "Net generation from natural gas"},
	{"NG.NUC", "Net generation from nuclear"}, {"NG.OIL", "Net generation from petroleum"},
	{"NG.WAT", "Net generation from hydro"}, {"NG.SUN", "Net generation from solar"},
	{"NG.WND", "Net generation from wind"}, {"NG.OTH", "Net generation from other fuel sources"},
}

var biddingZones = []struct{ c, n, office string }{
	{"DE_LU", "Germany-Luxembourg", "11"}, {"FR", "France", "17"}, {"ES", "Spain", "18"}, {"PT", "Portugal", "16"},
	{"IT_NORD", "Italy North", "26"}, {"IT_CNOR", "Italy Centre-North", "26"}, {"IT_SUD", "Italy South", "26"},
	{"IT_SICI", "Italy Sicily", "26"}, {"NL", "Netherlands", "49"}, {"BE", "Belgium", "22"}, {"AT", "Austria", "14"},
	{"CH", "Switzerland", "12"}, {"PL", "Poland", "19"}, {"CZ", "Czech Republic", "27"}, {"SK", "Slovakia", "24"},
	{"HU", "Hungary", "15"}, {"SI", "Slovenia", "28"}, {"HR", "Croatia", "31"}, {"RO", "Romania", "30"},
	{"BG", "Bulgaria", "32"}, {"GR", "Greece", "29"}, {"SE_1", "Sweden SE1", "46"}, {"SE_2", "Sweden SE2", "46"},
	{"SE_3", "Sweden SE3", "46"}, {"SE_4", "Sweden SE4", "46"}, {"NO_1", "Norway NO1", "50"},
	{"NO_2", "Norway NO2", "50"}, {"NO_3", "Norway NO3", "50"}, {"NO_4", "Norway NO4", "50"},
	{"NO_5", "Norway NO5", "50"}, {"DK_1", "Denmark DK1", "45"}, {"DK_2", "Denmark DK2", "45"},
	{"FI", "Finland", "44"}, {"EE", "Estonia", "38"}, {"LV", "Latvia", "43"}, {"LT", "Lithuania", "41"},
	{"IE_SEM", "Ireland (SEM)", "47"}, {"RS", "Serbia", "34"},
}

var entsoeTypes = []code{
	{"B01", "Biomass"}, {"B02", "Fossil Brown coal/Lignite"}, {"B04", "Fossil Gas"}, {"B05", "Fossil Hard coal"},
	{"B06", "Fossil Oil"}, {"B10", "Hydro Pumped Storage"}, {"B11", "Hydro Run-of-river and poundage"},
	{"B12", "Hydro Water Reservoir"}, {"B14", "Nuclear"}, {"B16", "Solar"}, {"B18", "Wind Offshore"},
	{"B19", "Wind Onshore"}, {"B20", "Other"},
}

var entsoeMeasures = []struct{ c, n, unit string }{
	{"LOAD", "Actual Total Load", "MWh"},
	{"LOAD_FC", "Day-ahead Total Load Forecast", "MWh"},
	{"DA_PRICE", "Day-ahead Price", "EUR/MWh"},
	{"IMB_PRICE", "Imbalance Price", "EUR/MWh"},
}

var freqLetter = [numFreq]string{"H", "D", "W", "M", "A"}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
