package ipamcore

import "context"

// UsagePoolsSQL is the usage query, for the EXPLAIN test.
const UsagePoolsSQL = usagePoolsSQL

// UsagePlannerSetting is what the usage transaction sets before the query.
const UsagePlannerSetting = usagePlannerSetting

// FastAllocate exposes the fast path to the external tests.
func (s *Store) FastAllocate(ctx context.Context, req AllocateRequest) (Allocation, bool) {
	r, ok := s.fastAllocate(ctx, req)
	return r.Allocation, ok
}
