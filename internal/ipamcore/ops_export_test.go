package ipamcore

// UsagePoolsSQL is the usage query, for the EXPLAIN test.
const UsagePoolsSQL = usagePoolsSQL
