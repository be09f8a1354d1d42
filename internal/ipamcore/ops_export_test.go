package ipamcore

// UsagePoolsSQL is the usage query, for the EXPLAIN test.
const UsagePoolsSQL = usagePoolsSQL

// UsagePlannerSetting is what the usage transaction sets before the query.
const UsagePlannerSetting = usagePlannerSetting
