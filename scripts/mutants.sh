#!/usr/bin/env bash
# make mutants: deliberate breakages of the guards that keep allocations
# safe, applied one at a time to a copy of the tree; the tests named with
# each must fail (the mutant is killed). A mutant that survives is a missing
# test or a dead guard. Prints killed and survived, and exits 1 when any
# survived (or a mutation no longer applies: the guard moved; or it does not
# compile, or it drops a named parameter's only use: either kills nothing).
#
#   scripts/mutants.sh            every mutant (starts a throwaway PostgreSQL)
#   scripts/mutants.sh NAME...    only those
#   scripts/mutants.sh --check    only that each mutation still applies to
#                                 its file exactly once (make test's check
#                                 tier: a guard that moved leaves its mutant
#                                 dead, which only a run would otherwise show)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

check_only=false
if [[ "${1:-}" == --check ]]; then
	check_only=true
	shift
elif [[ -z "${IPAM_TEST_DATABASE_URL:-}" ]]; then
	exec bash scripts/with-postgres.sh bash "$0" "$@"
fi

# name | file | perl substitution (one match required) | go test -run pattern | package
# A guard inside a function is mutated in its current definition
# (migrations/functions/NAME.sql), never in a numbered migration: Migrate
# applies the definitions last, so a mutant of an older copy would be dead.
mutants=(
	"confirm-forgets-pool-lock|ipam/internal/engine/handout.go|s/(kind <> 'parked'\n\t\t\`\+)guardPoolLock.in\(guardAt\{\}\)\+\`/\$1\`/|^TestExploreInterleavings\$|./ipam/internal/engine/"
	"row-trigger-accepts-outside|migrations/functions/ipam_allocations_in_pool.sql|s/(-- Inside its pool, as migration 12 had it\.\n(?:.*\n){4})    IF NOT FOUND THEN/\$1    IF false THEN/|^TestSchemaInvariants\$|./ipam/internal/engine/"
	"row-trigger-skips-confirm|migrations/012_in_pool.sql|s/AND \(OLD.state IS DISTINCT FROM NEW.state OR /AND (/|^TestSchemaInvariants\$|./ipam/internal/engine/"
	"pool-trigger-accepts-shrink|migrations/functions/ipam_pools_keep_live_rows.sql|s/IF FOUND THEN\n        RAISE EXCEPTION 'pool %/IF false THEN\n        RAISE EXCEPTION 'pool %/|^TestSchemaInvariants\$|./ipam/internal/engine/"
	"pool-trigger-no-delete|migrations/functions/ipam_pools_keep_live_rows.sql|s/AND \(TG_OP = 'DELETE' OR /AND (/|^TestSchemaInvariants\$|./ipam/internal/engine/"
	"forced-destroy-keeps-live-rows|ipam/internal/engine/cluster.go|s/\{sqlForceRelease, \"\"\}/{sqlDropPoolHolds, \"\"}/|^TestDeleteClusterRefusesWhileHolding\$|./ipam/internal/engine/"
	"set-replacement-moves-key|ipam/internal/engine/set.go|s/return p.ID == own \}\); i > 0 \{/return p.ID == own }); false \&\& i > 0 {/|^TestSetReplacementKeepsAKeyInALaterPool\$|./ipam/internal/engine/"
	"set-change-unserialized|ipam/internal/engine/set.go|s/tx.Exec\(ctx, sqlLockSet, /tx.Exec(ctx, \"SELECT \\\$1::text, \\\$2::text\", /|^TestExploreInterleavings\$|./ipam/internal/engine/"
	"grow-under-pool-lock|ipam/internal/engine/allocate.go|s/grow\[node\] = true\n\t\t\treturn res, errRetry/grow[node] = true\n\t\t\treturn s.allocateGrowing(ctx, tx, pool, req, grow)/|^TestExploreInterleavings\$|./ipam/internal/engine/"
	"grow-locks-scaling-row-first|ipam/internal/engine/allocate.go|s/err := lockScaledNode\(ctx, tx, clusterID, node, true\)\n\tif errors.Is/_, err := loadScaling(ctx, tx, clusterID, node)\n\tif errors.Is/|^TestExploreInterleavings\$|./ipam/internal/engine/"
	"grow-owners-node|ipam/internal/engine/allocate.go|s/\tnode, blocks := pool.blocksNode\(\)/\t_, blocks := pool.blocksNode()\n\tnode := req.Owner.NodeID/|^TestNodeBlocksGrowForWhoeverDrawsFromThem\$|./ipam/internal/engine/"
	"growth-waits-for-allocations|ipam/internal/engine/statements.go|s/(sqlLockPoolForGrowth = sqlLockPoolsHead \+ \`id = \\\$1\` \+ )sqlForNoKeyUpdate/\$1sqlForUpdate/|^TestPlacementsInFlightGrowAFullNodeAtOnce\$|./ipam/internal/engine/"
	"pool-trigger-locks-widening|migrations/functions/ipam_pools_keep_live_rows.sql|s/AND NEW.cidrs \@> OLD.cidrs AND OLD.exclude \@> NEW.exclude THEN/AND false THEN/|^TestPlacementsInFlightGrowAFullNodeAtOnce\$|./ipam/internal/engine/"
	"pool-trigger-passes-narrowing|migrations/functions/ipam_pools_keep_live_rows.sql|s/AND NEW.cidrs \@> OLD.cidrs AND OLD.exclude \@> NEW.exclude THEN/THEN/|^TestSchemaInvariants\$|./ipam/internal/engine/"
	"replacement-create-moves-kept-address|ipam/internal/engine/allocate.go|s/\tif held.PoolID == pool.ID \&\& held.Owner.sameTenant\(req.Owner\)/\tif false \&\& held.PoolID == pool.ID \&\& held.Owner.sameTenant(req.Owner)/|^TestExploreInterleavings\$|./ipam/internal/engine/"
	"release-own-changed-answers-nothing|ipam/internal/engine/release.go|s/\t\tcase herr == nil:\n/\t\tcase false \&\& herr == nil:\n/|^TestExploreInterleavings\$|./ipam/internal/engine/"
	"adoption-ignores-another-plans-mark|ipam/internal/engine/statements.go|s/\t\t\tAND \`\+takeOverSQL\(callerOriginSetting\)\+\`/\t\t\tAND (true OR \`+takeOverSQL(callerOriginSetting)+\`)/|^TestExploreInterleavings\$|./ipam/internal/engine/"
	"block-take-back-any-node|ipam/internal/engine/statements.go|s/WHERE cluster_id = \\\$1 AND node_id = \\\$2 AND state = 'cooling'/WHERE cluster_id = \\\$1 AND \\\$2::text IS NOT NULL AND state = 'cooling'/|^TestNodeTakesItsOwnParkedBlockBack\$|./ipam/internal/engine/"
	"block-take-back-keeps-parked-pool|ipam/internal/engine/blocks.go|s/\tif err == nil \{\n\t\t_, err := tx.Exec\(ctx, sqlDeletePool, parkedPoolID\(c.ID, b\)\)/\tif err == nil {\n\t\t_, err := tx.Exec(ctx, sqlDeletePool, \"\")/|^TestNodeTakesItsOwnParkedBlockBack\$|./ipam/internal/engine/"
	"block-take-back-any-parked|ipam/internal/engine/statements.go|s/ORDER BY EXISTS \(SELECT 1 FROM ipam_pools p WHERE p.cluster_id = \\\$1 AND p.kind = 'parked' AND p.cidrs = ARRAY\[b.block\]\) DESC,/ORDER BY/|^TestNodeTakesBackTheBlockHoldingCoolingAddresses\$|./ipam/internal/engine/"
	"blocks-replace-refuses-in-use|ipam/internal/engine/blocks.go|s/err != nil \x7c\x7c replacing \{/err != nil \x7c\x7c false \&\& replacing {/|^TestMarkedBlocksInUseAreLeftForTheReplacement\$|./ipam/internal/engine/"
	"blocks-replace-any-actor|ipam/internal/engine/blocks.go|s/return o.replacing \&\& o.actor == s.actor, err/return o.replacing, err/|^TestMarkedBlocksInUseAreLeftForTheReplacement\$|./ipam/internal/engine/"
	"blocks-replace-without-generation|ipam/internal/engine/blocks.go|s/\t\t\tif generation > 0 \{\n\t\t\t\tif replacing/\t\t\tif true {\n\t\t\t\tif replacing/|^TestMarkedBlocksInUseAreLeftForTheReplacement\$|./ipam/internal/engine/"
	"fast-path-failure-unrecorded|ipam/internal/engine/allocate.go|s/\t\terr = s.givenUp\(ctx, err\)\n\t\ts.recordAllocFailure\(ctx, r, nil, err\)\n/\t\terr = s.givenUp(ctx, err)\n/|^TestPlacementInAKilledSessionIsNamedAndRecorded\$|./ipam/internal/engine/"
	"closed-client-keeps-calling|ipam/internal/engine/conn.go|s/\tif s.pool.isClosed\(\) \{\n\t\treturn puddle.ErrClosedPool/\tif false \&\& s.pool.isClosed() {\n\t\treturn puddle.ErrClosedPool/|^TestCallAfterCloseOfABorrowingClientIsNamed\$|./ipam/internal/engine/"
	"default-move-does-not-wait|ipam/internal/engine/pool_operator.go|s/errors.Is\(err, errDefaultHeld\) \x7c\x7c time.Now\(\).After\(deadline\) \{/errors.Is(err, errDefaultHeld) \x7c\x7c time.Now().After(deadline.Add(-defaultMoveWait)) {/|^TestDefaultMovedBetweenPoolsInEitherOrder\$|./ipam/internal/engine/"
	"list-owner-held-unmarked|ipam/internal/engine/statements.go|s/p.category, coalesce\(. \+ stateHeldSQL \+ ., false\) AS state_held/p.category, false AS state_held/|^TestConcurrentHistoriesAreLinearizable\$|./ipam/internal/engine/"
	"tombstone-inherits-release-time|ipam/internal/engine/statements.go|s/t.instance_id, t.actor, t.allocated_at, t.released_at,/t.instance_id, t.actor, t.released_at, t.released_at,/|^TestInheritedCoolingAddressKeepsItsHandOutTime\$|./ipam/internal/engine/"
	"list-owner-id-unfiltered|ipam/internal/engine/statements.go|s/sqlListByOwnerID   = .a.owner_id = \\\$%d./sqlListByOwnerID   = \x22\\\$%d::text IS NOT NULL\x22/|^TestConcurrentHistoriesAreLinearizable\$|./ipam/internal/engine/"
	"list-expired-hold-not-cooling|ipam/internal/engine/ops_list.go|s/\ta.State = StateCooling\n/\n/|^TestExpireHold\$|./ipam/internal/engine/"
	"list-owner-former-cluster-refused|ipam/internal/engine/ops_list.go|s/former, rest, ok := strings.Cut\(id, \x22\/\x22\)/former, rest, ok := \x22\x22, id, false/|^TestTombstoneOwnerIsScopedByCluster\$|./ipam/internal/engine/"
	"carve-locks-instance-pool|ipam/internal/engine/blocks.go|s/\tif top < ordBlock \{/\tif false \&\& top < ordBlock {/|^TestPlacementsInFlightCarveFreshBlocksInAMixedFleet\$|./ipam/internal/engine/"
	"carve-leaves-instance-counter|ipam/internal/engine/blocks.go|s/\tif top < ordBlock \{/\tif true \x7c\x7c top < ordBlock {/|^TestUsageAfterNodeBlocks\$|./ipam/internal/engine/"
	"carve-cuts-counter-to-half|ipam/internal/engine/blocks.go|s/bits <= 62 \&\& handed > ordFloor \{/bits <= 62 \&\& false \&\& handed > ordFloor {/|^TestFirstCarveKeepsWhatTheCounterHandedOut\$|./ipam/internal/engine/"
	"growth-rewrites-kept-blocks|ipam/internal/engine/blocks.go|s/for kept < min\(len\(had\), len\(blocks\)\)/for false \&\& kept < min(len(had), len(blocks))/|^TestPlacementsInFlightGrowAFullNodeAtOnce\$|./ipam/internal/engine/"
	"blocks-pick-waits|ipam/internal/engine/allocate.go|s/errors.Is\(err, pgx.ErrNoRows\) \&\& pool.Kind != kindBlocks \{/errors.Is(err, pgx.ErrNoRows) {/|^TestPlacementsInFlightGrowAFullNodeAtOnce\$|./ipam/internal/engine/"
	"waiting-pick-deadlock-retries|ipam/internal/engine/allocate.go|s/if lockConflict\(err\) \{\n\t\tif err := sp.Rollback/if false \&\& lockConflict(err) {\n\t\tif err := sp.Rollback/|^TestCallersWaitingForEachOthersLastAddresses\$|./ipam/internal/engine/"
	"stripe-wait-deadlock-retries|ipam/internal/engine/allocate.go|s/if lockConflict\(err\) \{\n\t\tif rerr := sp.Rollback/if false \&\& lockConflict(err) {\n\t\tif rerr := sp.Rollback/|^TestCallersWaitingForEachOthersFullInstancePool\$|./ipam/internal/engine/"
	"stalled-call-silent|ipam/internal/engine/conn.go|s/\t\tcase ctx.Err\(\) == nil \&\& !errors.Is\(err, errAsideBusy\)/\t\tcase false \&\& ctx.Err() == nil \&\& !errors.Is(err, errAsideBusy)/|^TestACallToAServerThatStoppedAnsweringIsReported\$|./ipam/internal/engine/"
	"set-key-never-grows|ipam/internal/engine/set.go|s/res, err = s.allocateGrowing\(ctx, tx, p, req, grow\)/res, err = s.allocateTx(ctx, tx, p, req)/|^TestNodeBlocksGrowForWhoeverDrawsFromThem\$|./ipam/internal/engine/"
	"set-grows-under-pool-locks|ipam/internal/engine/set.go|s/if err := grow.lockFirst\(ctx, tx, ch.ClusterID\); err != nil \{/if err := growth(nil).lockFirst(ctx, tx, ch.ClusterID); err != nil {/|^TestSetsAndInstancesGrowFullNodesAtOnce\$|./ipam/internal/engine/"
	"set-restate-ignores-fit|ipam/internal/engine/set.go|s/if !fits \x7c\x7c \(e\.Address\.IsValid\(\)/if false \&\& !fits \x7c\x7c (e.Address.IsValid()/|^TestAddressSetRestateKeepsTheAddress\$|./ipam/internal/engine/"
	"forced-destroy-cools-holds|ipam/internal/engine/statements.go|s/(WHERE a.pool_id = p.id AND p.id = ANY \(\\\$1::text\[\]\)\n\t\t\tAND \` \+ )rowActive/\$1rowLive/|^TestDeleteClusterRefusesWhileHolding\$|./ipam/internal/engine/"
	"cluster-destroy-skips-recount|ipam/internal/engine/cluster.go|s/if !slices.Equal\(locked, now\) \{/if false \&\& !slices.Equal(locked, now) {/|^TestDeleteClusterCountsAPoolCreatedWhileItWaited\$|./ipam/internal/engine/"
	"pool-blocks-may-overlap|migrations/006_invariants.sql|s/EXCLUDE USING gist \(block inet_ops WITH &&\)/EXCLUDE USING gist (block inet_ops WITH =)/|^TestSeamPoolsNeverCrossClusters\$|./ipam/internal/engine/"
	"mixed-block-is-public|migrations/functions/ipam_block_class.sql|s/        WHEN b && ANY \(ipam_private_ipv4\(\)\) THEN 'mixed'\n//|^TestSeamPublicBlockHoldingPrivateSpace\$|./ipam/internal/engine/"
	"check-forgives-cross-cluster-duplicates|ipam/internal/engine/statements.go|s/OR \(count\(\*\) > 1 AND ipam_block_class/OR (false AND ipam_block_class/|^TestCheckCountsEveryDuplicate\$|./ipam/internal/engine/"
	"node-use-counts-expired-holds|ipam/internal/engine/statements.go|s/(sqlNodeUse = .SELECT count\(\*\) FROM ipam_allocations a WHERE pool_id = \\\$1 AND . \+ )rowLive/\$1rowInUse/|^TestExpiredHoldWithCooldownIsCooling\$|./ipam/internal/engine/"
	"counter-top-keeps-size|ipam/internal/engine/statements.go|s/UPDATE ipam_pools SET size = least\(size, \\\$3\) WHERE id = \\\$1/UPDATE ipam_pools SET size = size WHERE id = \\\$1 AND \\\$3::bigint IS NOT NULL/|^TestUsageAfterNodeBlocks\$|./ipam/internal/engine/"
	"cooling-row-deletable|migrations/functions/ipam_allocations_keep_cooldown.sql|s/IF OLD.state <> 'active' AND NOT EXISTS \(SELECT 1 FROM ipam_pools WHERE id = OLD.pool_id\) THEN/IF true THEN/|^TestSchemaInvariants\$|./ipam/internal/engine/"
	"destroy-buries-nothing|migrations/functions/ipam_allocations_keep_cooldown.sql|s/IF until > ipam_now\(\) THEN/IF false THEN/|^TestTombstonesOutliveTheirCluster\$|./ipam/internal/engine/"
	"new-pool-inherits-nothing|ipam/internal/engine/pool.go|s/if p.Kind == kindParked \{\n\t\treturn nil/if true {\n\t\treturn nil/|^(TestTombstonesOutliveTheirCluster|TestForcedDestroyLeavesTombstones)\$|./ipam/internal/engine/"
	"row-trigger-digs-up-tombstones|migrations/functions/ipam_allocations_in_pool.sql|s/AND NOT \(\(cluster_id, owner_kind, owner_id\) IS NOT DISTINCT FROM \(NEW.cluster_id, NEW.owner_kind, NEW.owner_id\)\n\s+AND coalesce\(org_id = NEW.org_id, org_id IS NULL\) AND coalesce\(env_id = NEW.env_id, env_id IS NULL\)\);/AND false;/|^TestSchemaRefusesBuriedAddress\$|./ipam/internal/engine/"
	"tombstone-owner-ignores-cluster|migrations/functions/ipam_allocations_in_pool.sql|s/AND NOT \(\(cluster_id, owner_kind, owner_id\) IS NOT DISTINCT FROM \(NEW.cluster_id, NEW.owner_kind, NEW.owner_id\)/AND NOT ((owner_kind, owner_id) IS NOT DISTINCT FROM (NEW.owner_kind, NEW.owner_id)/|^TestSchemaRefusesBuriedAddress\$|./ipam/internal/engine/"
	"tombstone-owner-ignores-tenant|migrations/functions/ipam_allocations_in_pool.sql|s/\n\s+AND coalesce\(org_id = NEW.org_id, org_id IS NULL\) AND coalesce\(env_id = NEW.env_id, env_id IS NULL\)\);/);/|^TestSchemaRefusesBuriedAddress\$|./ipam/internal/engine/"
	"own-cooling-ignores-tenant|ipam/internal/engine/fragments.go|s/\treturn \`coalesce\(\` \+ col\(\"org_id\"\) \+ \` = \` \+ org \+ \`, \` \+ col\(\"org_id\"\) \+ \` IS NULL\)\n\t\t\tAND coalesce\(\` \+ col\(\"env_id\"\) \+ \` = \` \+ env \+ \`, \` \+ col\(\"env_id\"\) \+ \` IS NULL\)\`/\treturn \`true\`/|^TestHandOutWriteRejudgesTheRow\$|./ipam/internal/engine/"
	"relabel-moves-tenant|ipam/internal/engine/statements.go|s/AND owner_id = \@owner AND state = 'active'\n\t\t\tAND \`\+sameTenantSQL\(guardAt\{\}.col, \`\@org\`, \`\@env\`\)\+\`\n/AND owner_id = \@owner AND state = 'active'\n/|^TestSeamRelabelKeepsTheTenant\$|./ipam/internal/engine/"
	"set-relabel-unchecked|ipam/internal/engine/set.go|s/\tcase err == nil:\n\t\treturn tenantChange\(held, labels\)/\tcase false:\n\t\treturn tenantChange(held, labels)/|^TestSeamRelabelKeepsTheTenant\$|./ipam/internal/engine/"
	"stale-judges-every-holder|ipam/internal/engine/statements.go|s/const staleSQL = stateHeldSQL \+ \`\n\tAND /const staleSQL = \`/|^TestStaleLeaks\$|./ipam/internal/engine/"
	"release-ignores-fresh-create|ipam/internal/engine/ops_release.go|s/if f.held \{\n(\t+)if !req.Force/if f.confirmed != nil {\n\$1if !req.Force/|^TestReleaseAllocation\$|./ipam/internal/engine/"
	"inventory-judges-terraform-allocations|ipam/internal/engine/ops_leaks.go|s/if cur.stateHeld \{/if false {/|^TestInventoryLeaksAndSafeReclaim\$|./ipam/internal/engine/"
	"fresh-row-generation-one|ipam/internal/engine/handout.go|s/ELSE 'active' END, \`\+newGenerationSQL\+\`,/ELSE 'active' END, 1,/|^TestStaleGenerationReleasesNothingOnAnotherAddress\$|./ipam/internal/engine/"
	"claimed-row-generation-one|ipam/internal/engine/statements.go|s/ELSE 'active' END,\n\t\t\t\`\+newGenerationSQL\+\`, \@kind/ELSE 'active' END,\n\t\t\t1, \@kind/|^TestStaleGenerationReleasesNothingOnAnotherAddress\$|./ipam/internal/engine/"
	"reuse-generation-per-row|ipam/internal/engine/handout.go|s/\t\tgeneration = \` \+ newGenerationSQL \+ \`,/\t\tgeneration = generation + 1,/|^TestConcurrentHistoriesAreLinearizable\$|./ipam/internal/engine/"
	"node-blocks-generation-one|migrations/034_generations_never_repeat.sql|s/ALTER COLUMN generation SET DEFAULT nextval\('ipam_generations'\);/ALTER COLUMN generation SET DEFAULT 1;/|^TestStaleGenerationReleasesNothingOnAnotherAddress\$|./ipam/internal/engine/"
	"release-refusal-silent|ipam/internal/engine/release.go|s/case herr == nil && \(held.Actor != s.actor \x7c\x7c !s.ownOrigin\(held\)\):/case herr == nil \&\& false \&\& (held.Actor != s.actor \x7c\x7c !s.ownOrigin(held)):/|^TestReleaseWithoutGenerationKeepsToItsActor\$|./ipam/internal/engine/"
	"replacement-mark-any-origin|ipam/internal/engine/statements.go|s/ AND \(replace_origin IS NULL OR replace_origin = \` \+ origin \+ \`\)\)\`/ AND (true OR replace_origin = \` + origin + \`))\`/|^TestReplacementMarkHoldsForItsOrigin\$|./ipam/internal/engine/"
	"vanished-pool-is-not-found|ipam/internal/engine/pool.go|s/would name nothing that is missing.\n\t\treturn errRetry/would name nothing that is missing.\n\t\treturn ErrNotFound/|^TestInstanceRacingBlockReleaseFindsItsPool\$|./ipam/internal/engine/"
	"same-owner-loser-exhausted|ipam/internal/engine/allocate.go|s/\n\t\terr = s.ownerWon\(ctx, tx, pool, req, first, err\)/\n\t\t_ = first/|^TestConcurrentRequestsOfOneOwnerAgree\$|./ipam/internal/engine/"
	"trigger-records-no-origin|migrations/functions/ipam_allocations_in_pool.sql|s/IF coalesce\(current_setting\('ipam.origin', true\), ''\) <> '' THEN/IF false THEN/|^TestConcurrentCreatesOfTwoOriginsNeverBothSucceed\$|./ipam/internal/engine/"
	"inherit-keeps-foreign-owner|ipam/internal/engine/statements.go|s/ELSE t.cluster_id \x7c\x7c '\/' \x7c\x7c t.owner_id END AS owner_id/ELSE t.owner_id END AS owner_id/|^TestTombstoneOwnerIsScopedByCluster\$|./ipam/internal/engine/"
	"lost-hold-takes-new-hold|ipam/internal/engine/hold.go|s/if reported \{\n\t\t\t\treturn Hold\{Lost: l\}/if reported \&\& false {\n\t\t\t\treturn Hold{Lost: l}/|^TestReserveReportsLostHold\$|./ipam/internal/engine/"
	"release-event-names-holder|ipam/internal/engine/statements.go|s/eventOfAlloc\+\`, \@actor, jsonb_build_object\('reusable_at',/eventOfRow+\`, jsonb_build_object('reusable_at',/|^TestReleaseIsOneRoundTrip\$|./ipam/internal/engine/"
	"release-locks-pool-late|ipam/internal/engine/statements.go|s/(SELECT id, cooldown FROM ipam_pools WHERE id = \(SELECT pool_id FROM held\)\`\+)poolLockSQL\+/\$1/|^TestExploreInterleavings\$|./ipam/internal/engine/"
	"refresh-answers-stale|ipam/internal/engine/lookup.go|s/if s.recordRefused\(err\) \x7c\x7c \(err == nil && lost\) \{/if s.recordRefused(err) \x7c\x7c (err == nil \&\& false \&\& lost) {/|^(TestExploreInterleavings|TestSetRefreshLeavesOutAMemberReleasedDuringItsRecord)\$|./ipam/internal/engine/"
	"reads-unguarded|ipam/internal/engine/conn.go|s/if lock <= 0 && stmt <= 0 \{\n\t\treturn ctx, nil/if true {\n\t\treturn ctx, nil/|^TestReadsWaitAtMostTheLockBound\$|./ipam/internal/engine/"
	"replacement-mark-never-ends|ipam/internal/engine/fragments.go|s/coalesce\(replace_generation = generation AND /coalesce(/|^TestMarkedReplacementIsTakenOver\$|./ipam/internal/engine/"
	"create-moves-unmarked-owner|ipam/internal/engine/allocate.go|s/\tif !replacing \{/\tif false {/|^TestMarkedReplacementIsTakenOver\$|./ipam/internal/engine/"
	"blocks-taken-over-unmarked|ipam/internal/engine/blocks.go|s/\tcase o.confirmed && !o.replacing:/\tcase o.confirmed:/|^TestMarkedBlocksAndSetsAreTakenOver\$|./ipam/internal/engine/"
	"blocks-release-ignores-generation|ipam/internal/engine/blocks.go|s/if generation > 0 && gen != generation \{/if false \&\& gen != generation {/|^TestMarkedBlocksAndSetsAreTakenOver\$|./ipam/internal/engine/"
	"set-release-ignores-generation|ipam/internal/engine/set.go|s/SetMemberOwner\(Owner\{\}, setID, key\), generations\[key\]\)/SetMemberOwner(Owner{}, setID, key), 0)/|^TestMarkedBlocksAndSetsAreTakenOver\$|./ipam/internal/engine/"
	"adoption-ignores-origin|ipam/internal/engine/statements.go|s/\treturn \`\(\` \+ ownOriginSQL\(origin\) \+ \` OR \`/\treturn \`(true OR \` + ownOriginSQL(origin) + \` OR \`/|^TestOriginDecidesAdoption\$|./ipam/internal/engine/"
	"hold-look-ignores-origin|ipam/internal/engine/statements.go|s/AND \`\+ownOriginSQL\(\"\@origin::text\"\)\+\`,/AND (true OR \`+ownOriginSQL(\"\@origin::text\")+\`),/|^TestHoldIsItsConfigurations\$|./ipam/internal/engine/"
	"foreign-live-hold-taken|ipam/internal/engine/allocate.go|s/\tcase foreign && held.Actor == s.actor:/\tcase false:/|^TestHoldIsItsConfigurations\$|./ipam/internal/engine/"
	"owner-taken-hold-forgotten|ipam/internal/engine/hold.go|s/return s.ownerTaken\(ctx, r, h, err\)/return h, err/|^TestHoldIsItsConfigurations\$|./ipam/internal/engine/"
	"lost-hold-shown-to-anyone|ipam/internal/engine/hold.go|s/if l != nil && l.ownerTaken && \(l.holderActor != s.actor \x7c\x7c l.holderOrigin != s.origin\) \{/if false {/|^TestHoldIsItsConfigurations\$|./ipam/internal/engine/"
	"release-without-generation-ignores-origin|ipam/internal/engine/statements.go|s/= \@actor AND \` \+\n\townOriginSQL\(callerOriginSetting\) \+ \`\)\)\`/= \@actor))\`/|^TestOriginDecidesAdoption\$|./ipam/internal/engine/"
	"go-client-adopts-configurations|ipam/internal/engine/store.go|s/return a.Origin == \"\" \x7c\x7c a.Origin == s.origin/return s.origin == \"\" \x7c\x7c a.Origin == \"\" \x7c\x7c a.Origin == s.origin/|^TestOriginDecidesAdoption\$|./ipam/internal/engine/"
	"listing-confirms|ipam/internal/engine/lookup.go|s/err := s.refreshRead\(!s.peek, /err := s.refreshRead(true, /|^TestManagersAndPeek\$|./ipam/internal/engine/"
	"listing-offers-managed-allocations|ipam/internal/engine/ops_list.go|s/if f.Unmanaged \{/if false {/|^TestManagersAndPeek\$|./ipam/internal/engine/"
	"pool-created-without-origin|migrations/functions/ipam_record_creator_origin.sql|s/NEW.creator_origin := nullif\(current_setting\('ipam.origin', true\), ''\);/NEW.creator_origin := NULL;/|^TestManagersAndPeek\$|./ipam/internal/engine/"
	"batch-shares-a-stripe-advance|ipam/internal/engine/handout.go|s/JOIN s ON s.rank = f.req_k % s.m AND/JOIN s ON s.rank = (f.req_k \/ 2) % s.m AND/|^TestSharedStatementHandsOutConsecutiveAddresses\$|./ipam/internal/engine/"
	"shared-hold-to-another-owner|ipam/internal/engine/fastpath.go|s/taken\[got\[i\].Owner.ID\] = &got\[i\]/taken[got[i].Owner.ID] = \&got[len(got)-1-i]/|^TestConcurrentHoldsShareStatements\$|./ipam/internal/engine/"
	"shared-hold-looks-skipped|ipam/internal/engine/fastpath.go|s/\t\tb.Queue\(sqlFindHold.sql, l.find\)\n\t\tb.Queue\(sqlLostHold, l.lost...\)\n/\t\tif len(ls) == 1 {\n\t\t\tb.Queue(sqlFindHold.sql, l.find)\n\t\t\tb.Queue(sqlLostHold, l.lost...)\n\t\t}\n/|^TestConcurrentHoldsShareStatements\$|./ipam/internal/engine/"
	"shared-hold-acks-uncommitted|ipam/internal/engine/fastpath.go|s/\t\tif terr != nil \{\n\t\t\tgot = nil\n\t\t\}\n/\t\tif terr != nil {\n\t\t\t_ = got\n\t\t}\n/|^TestSharedStatementWhoseCommitFailsAcknowledgesNothing\$|./ipam/internal/engine/"
	"placement-undoes-unmade-savepoint|ipam/internal/engine/fastpath.go|s/saved := err == nil/saved := true/|^TestAllocateInstanceInCallersTransaction\$|./ipam/internal/engine/"
	"caller-read-only-taken-for-standby|ipam/internal/engine/store.go|s/\tif callersReadOnly \{/\tif false \&\& callersReadOnly {/|^TestAllocateInstanceInCallersTransaction\$|./ipam/internal/engine/"
	"lock-look-asks-once|ipam/internal/engine/conn.go|s/\t\tif err == nil \{\n\t\t\treturn out, true\n/\t\tif err == nil \x7c\x7c true {\n\t\t\treturn out, true\n/|^TestLockHolderLookupThatCannotAnswerAtFirst\$|./ipam/internal/engine/"
	"lock-look-queues-behind-waiters|ipam/internal/engine/conn.go|s/if st := p.Stat\(\); st.IdleConns\(\) > 0 \x7c\x7c st.TotalConns\(\) < st.MaxConns\(\) \{/if true {/|^TestLockHolderLookupWithEveryConnectionWaiting\$|./ipam/internal/engine/"
	"lock-look-per-caller|ipam/internal/engine/conn.go|s/s.looks.DoChan\(\x22\x22, /s.looks.DoChan(fmt.Sprint(rand.Int64()), /|^TestLockHolderLookupWithEveryConnectionWaiting\$|./ipam/internal/engine/"
	"failure-record-queues-behind-callers|ipam/internal/engine/store.go|s/_ = s.aside\(rctx, s.pool, func\(q querier\) error \{ return q.SendBatch\(rctx, b\).Close\(\) \}\)/_ = s.pool.SendBatch(rctx, b).Close()/|^TestFailedPlacementsHoldingEveryConnectionAreRecorded\$|./ipam/internal/engine/"
	"confirm-answers-first-block|ipam/internal/engine/fragments.go|s/\(SELECT c FROM ipam_pools p, unnest\(p.cidrs\) c WHERE p.id = a.pool_id AND a.address <<= c LIMIT 1\)/(SELECT p.cidrs[1] FROM ipam_pools p WHERE p.id = a.pool_id)/|^TestConfirmedHoldAnswersItsBlock\$|./ipam/internal/engine/"
	"aside-conn-skips-pool-hook|ipam/internal/engine/conn.go|s/\tif pc.AfterConnect != nil \{/\tif false \&\& pc.AfterConnect != nil {/|^TestFailedPlacementsHoldingEveryConnectionAreRecorded\$|./ipam/internal/engine/"
	"aside-conns-at-once|ipam/internal/engine/conn.go|s/case s.asideSlot <- struct\{\}\{\}:\n\t\tdefer func\(\) \{ <-s.asideSlot \}\(\)/default:/|^TestFailedPlacementsHoldingEveryConnectionAreRecorded\$|./ipam/internal/engine/"
	"caller-give-up-waited-out|ipam/internal/engine/conn.go|s/ \x7c\x7c ctx\.Err\(\) != nil \{/ {/|^TestCallerGivingUpIsNamed\$|./ipam/internal/engine/"
	"caller-give-up-named-unavailable|ipam/internal/engine/store.go|s/\tif ge := s.gaveUp\(err\); ge != nil \{/\tif ge := s.gaveUp(err); false \&\& ge != nil {/|^TestCallerGivingUpIsNamed\$|./ipam/internal/engine/"
	"caller-deadline-taken-for-take-bound|ipam/internal/engine/fastpath.go|s/ctx.Err\(\) != nil \&\& errors.Is\(context.Cause\(ctx\), errTakeBound\)/ctx.Err() != nil/|^TestCallerGivingUpIsNamed\$|./ipam/internal/engine/"
	"caller-tx-query-mode-unchecked|ipam/internal/engine/store.go|s/\t\tc.outerErr = checkExecMode\(/\t\t_ = checkExecMode(/|^TestAllocateInstanceInCallersTransaction\$|./ipam/internal/engine/"
	"id-check-admits-metacharacters|ipam/internal/engine/input.go|s/\t\tcase i > 0 \&\& \(c == '.'/\t\tcase i > 0 \x7c\x7c (c == '.'/|^FuzzValidateID\$|./ipam/internal/engine/"
	"placement-plans-with-callers-seqscan|ipam/internal/engine/statements.go|s/set_config\('enable_seqscan', 'off', true\),\n\t\tset_config\('jit', 'off', true\), set_config\('ipam.origin'/set_config('jit', 'off', true), set_config('ipam.origin'/|^TestFastStatementsUseTheirGenericPlans\$|./ipam/internal/engine/"
	"placement-keeps-its-seqscan-setting|ipam/internal/engine/statements.go|s/,\n\t\tset_config\('enable_seqscan', current_setting\('ipam.callers_enable_seqscan'\), true\)//|^TestFastStatementsUseTheirGenericPlans\$|./ipam/internal/engine/"
	"placement-pick-never-wraps|ipam/internal/engine/handout.go|s/from\(\"<\", \` AND NOT EXISTS/from(\"<\", \` AND false AND NOT EXISTS/|^TestAllocateInstanceInCallersTransaction\$|./ipam/internal/engine/"
	# The hand-out guards (ipam/internal/engine/handout.go): each mutant makes one guard's
	# definition in the registry pass everything, in every statement that
	# carries it (TestEveryGuardHasAMutant requires one per guard); the last
	# leaves one guard out of one statement, which the proof test catches.
	"guard-owner-free|ipam/internal/engine/handout.go|s/(guardOwnerFree = guard\{[^\n]*\n\t\tfunc\(at guardAt\) string \{\n\t\t\treturn )/\$1\"true OR \" + /|^TestHandOutRulesOnEveryPath\$|./ipam/internal/engine/"
	"event-origin-unstamped|migrations/026_event_origin.sql|s/ADD COLUMN origin text DEFAULT nullif\(current_setting\('ipam.origin', true\), ''\);/ADD COLUMN origin text;/|^TestEveryEventRecordsItsOrigin\$|./ipam/internal/engine/"
	"shared-take-acks-uncommitted|ipam/internal/engine/fastpath.go|s/\t\treturn nil, err\n\t\}\n\treturn got, nil/\t\treturn got, err\n\t}\n\treturn got, nil/|^TestSharedStatementWhoseCommitFailsAcknowledgesNothing\$|./ipam/internal/engine/"
	"guard-no-lost-hold|ipam/internal/engine/handout.go|s/(guardNoLostHold = guard\{[^\n]*\n\t\tfunc\(at guardAt\) string \{\n\t\t\treturn )/\$1\"true OR \" + /|^(TestReserveReportsLostHold|TestHandOutRulesOnEveryPath)\$|./ipam/internal/engine/"
	"guard-node-blocks-first|ipam/internal/engine/handout.go|s/(guardNodeBlocksFirst = guard\{[^\n]*\n\t\tfunc\(at guardAt\) string \{\n\t\t\treturn )/\$1\"true OR \" + /|^TestHandOutRulesOnEveryPath\$|./ipam/internal/engine/"
	"guard-counter-shape|ipam/internal/engine/handout.go|s/(guardCounterShape = guard\{[^\n]*\n\t\tfunc\(guardAt\) string \{\n\t\t\treturn \`)/\$1kind IN ('counter', 'table') OR /|^TestHandOutRulesOnEveryPath\$|./ipam/internal/engine/"
	"guard-pool-lock|ipam/internal/engine/handout.go|s/(guardPoolLock = guard\{[^\n]*\n\t\tfunc\(guardAt\) string \{ return )poolLockSQL/\$1\"\\\\n\"/|^TestExploreInterleavings\$|./ipam/internal/engine/"
	"guard-stripe-room|ipam/internal/engine/handout.go|s/(guardStripeRoom = guard\{[^\n]*\n\t\tfunc\(at guardAt\) string \{ return )/\$1\"true OR \" + /|^TestHandOutRulesOnEveryPath\$|./ipam/internal/engine/"
	"guard-cooled|ipam/internal/engine/handout.go|s/(guardCooled = guard\{[^\n]*\n\t\tfunc\(at guardAt\) string \{\n\t\t\treturn )/\$1\"true OR \" + /|^TestHandOutRulesOnEveryPath\$|./ipam/internal/engine/"
	"guard-reusable-or-own|ipam/internal/engine/handout.go|s/(guardReusableOrOwn = guard\{[^\n]*\n\t\tfunc\(at guardAt\) string \{\n\t\t\treturn )/\$1\"true OR \" + /|^TestHandOutWriteRejudgesTheRow\$|./ipam/internal/engine/"
	"guard-no-expired-hold|ipam/internal/engine/handout.go|s/(guardNoExpiredHold = guard\{[^\n]*\n\t\tfunc\(at guardAt\) string \{\n\t\t\treturn )/\$1\"true OR \" + /|^TestHandOutRulesOnEveryPath\$|./ipam/internal/engine/"
	"guard-own-hold|ipam/internal/engine/handout.go|s/(guardOwnHold = guard\{[^\n]*\n\t\tfunc\(at guardAt\) string \{\n\t\t\treturn )/\$1\"true OR \" + /|^TestHoldIsItsConfigurations\$|./ipam/internal/engine/"
	"statement-drops-guard|ipam/internal/engine/handout.go|s/(SELECT r.\* FROM req r\n\t\tWHERE )\`\+allOf\(servedGuards, ownerOfReq\)\+\`/\$1true/|^TestEveryHandOutStatementCarriesItsGuards\$|./ipam/internal/engine/"
	"read-only-server-waited-out|ipam/internal/engine/conn.go|s/if ctx.Value\(writesOptionalKey\{\}\) == nil /if ctx.Value(writesOptionalKey{}) != \"never\" /|^TestReadOnlyServerRefusesOptionalWritesAtOnce\$|./ipam/internal/engine/"
	"read-only-plan-drops-live-hold|ipam/internal/engine/hold.go|s/if !WriteRefused\(err\) \{/if true {/|^TestReadOnlyServerRefusesOptionalWritesAtOnce\$|./ipam/internal/engine/"
	"read-only-refusal-drops-connection|ipam/internal/engine/store.go|s/if failoverError\(err\) && s.readOnlyRefusal\(ctx, err\) == nil \{/if failoverError(err) {/|^TestReadOnlyServerRefusesOptionalWritesAtOnce\$|./ipam/internal/engine/"
	"pick-ignores-changed-stripes|ipam/internal/engine/handout.go|s/changedSinceSnapshot = \`\(xmax <> '0'::xid AND /changedSinceSnapshot = \`(false AND /|^TestFreshPickTriesChangedStripesLast\$|./ipam/internal/engine/"
	"shared-pick-plain-order|ipam/internal/engine/handout.go|s/changedLast := changedSinceSnapshot \+ \", \"/changedLast := \"\"/|^TestFreshPickTriesChangedStripesLast\$|./ipam/internal/engine/"
	"read-only-rows-waited-out|ipam/internal/engine/conn.go|s/ && r.p.s.readOnlyRefusal\(r.ctx, err\) == nil:/:/|^TestReadOnlyServerRefusesOptionalWritesAtOnce\$|./ipam/internal/engine/"
	"listing-by-instance-misses-labelled|ipam/internal/engine/statements.go|s/AND \(owner_kind <> .\` \+ OwnerInstance \+ \`. OR owner_id <> instance_id\)/AND false/|^TestListByInstanceReadsEveryBranch\$|./ipam/internal/engine/"
	"listing-first-page-unordered|ipam/internal/engine/statements.go|s/ORDER BY cluster_id, pool_id, ordinal (?=LIMIT \S+\) first)//|^TestListAllocations\$|./ipam/internal/engine/"
	"cooldown-audit-not-latest-release|ipam/internal/engine/statements.go|s/ORDER BY h.id, r.at DESC, r.id DESC/ORDER BY h.id, r.at, r.id/|^TestCheckCooldownJudgesTheLatestReleaseBefore\$|./ipam/internal/engine/"
	"clock-is-transaction-start|migrations/functions/ipam_now.sql|s/RETURN statement_timestamp\(\)/RETURN now()/|^TestATransactionBegunBeforeAReleaseSeesItsAddressFree\$|./ipam/internal/engine/"
	"waiting-pick-judged-once|ipam/internal/engine/allocate.go|s/if errors.Is\(err, pgx.ErrNoRows\) && !deadlocked \{/if false \&\& !deadlocked {/|^TestARequestThatWaitedForAReleaseTakesItsAddress\$|./ipam/internal/engine/"
	"claim-judged-once|ipam/internal/engine/allocate.go|s/\tif claimRefusedByTime\(cur, req.Owner\) \{/\tif false \&\& claimRefusedByTime(cur, req.Owner) {/|^TestARequestThatWaitedForAReleaseTakesItsAddress\$|./ipam/internal/engine/"
	"claim-own-cooling-any-tenant|ipam/internal/engine/allocate.go|s/return !cur.Owner.sameKey\(o\) .. !cur.Owner.sameTenant\(o\)/return !cur.Owner.sameKey(o)/|^TestOwnCoolingAddressStaysWithItsTenant\$|./ipam/internal/engine/"
	"own-cooling-any-tenant|ipam/internal/engine/statements.go|s/AND \` \+ sameTenantSQL\(guardAt\{\}.col, /AND \` + sameTenantSQL(func(string) string { return \"NULL\" }, /|^(TestOwnCoolingAddressStaysWithItsTenant|TestHandOutRulesOnEveryPath)\$|./ipam/internal/engine/"
	"replacement-mark-read-unlocked|ipam/internal/engine/statements.go|s/WHERE id = \@id FOR NO KEY UPDATE\`\)/WHERE id = \@id\`)/|^TestExploreInterleavings\$|./ipam/internal/engine/"
	"owner-won-only-own-address|ipam/internal/engine/allocate.go|s/refused := errors.As\(err, &ex\) \x7c\x7c errors.As\(err, &iu\) \x7c\x7c/refused := errors.As(err, \&ex) \x7c\x7c (errors.As(err, \&iu) \&\& iu.OwnerID == req.Owner.ID) \x7c\x7c/|^TestExploreInterleavings\$|./ipam/internal/engine/"
	"owner-won-not-after-take|ipam/internal/engine/allocate.go|s/\tcase \(err == nil .. ex != nil\) \&\& !req.Address.IsValid\(\)/\tcase false \&\& !req.Address.IsValid()/|^TestARequestOfAnOwnerReleasedMeanwhileGetsItsLatestAddress\$|./ipam/internal/engine/"
	"owner-won-counts-own-release|ipam/internal/engine/allocate.go|s/\(first.held == nil .. now.ID != first.held.ID\)/true/|^(TestHoldIsItsConfigurations|TestSeamAbandonedHoldExpiresWithItsTTL)\$|./ipam/internal/engine/"
	"hold-look-answers-over-take|ipam/internal/engine/hold.go|s/\tcase taken != nil:/\tcase taken != nil \&\& !found:/|^TestAHoldTakenWithItsLookAnswersThePlan\$|./ipam/internal/engine/"
	"at-in-password-accepted|ipam/internal/engine/store.go|s/if ambiguousUserinfo\(pc\) \{/if false {/|^TestProviderErrorsNeverCarryThePassword\$|./internal/provider/"
	"wait-reported-by-pause-span|ipam/internal/engine/conn.go|s/int\(after\/WaitReportInterval\) > \*reported/after\/WaitReportInterval > before\/WaitReportInterval/|^TestAWaitCrossedDuringAnAttemptIsReported\$|./ipam/internal/engine/"
	"release-hides-hold|ipam/internal/engine/ops_release.go|s/heldByAPlan\(ctx, tx, addr, req\)\)/\"\")/|^TestReleaseAllocation\$|./ipam/internal/engine/"
	"expire-hold-writes-any-row|ipam/internal/engine/statements.go|s/WHERE id = \\\$1 AND generation = \\\$2 AND \` \+ rowHeld \+ \`(\n\t\tRETURNING \` \+ allocColumns\n\n\t\/\/ sqlHoldUntil)/WHERE id = \\\$1 AND \\\$2::bigint > 0\$1/|^TestAHoldExpiredWhileItsPlanIsApplied\$|./ipam/internal/engine/"
	"drop-hold-of-live-plan|ipam/internal/engine/statements.go|s/\t\t\tAND \(NOT \@lost::boolean OR reserved_until <= \(SELECT ipam_now\(\)\)\)\n//|^TestAnExtendedHoldIsNotTakenOver\$|./ipam/internal/engine/"
	"hold-look-judges-cooldown|ipam/internal/engine/statements.go|s/OR \(state = 'reserved' AND reserved_until > \(SELECT ipam_now\(\)\) \+ \@fresh_for/OR (state = 'reserved' AND reusable_at > (SELECT ipam_now()) + \@fresh_for/|^TestAPlanExtendsAHoldThatKeptACooldown\$|./ipam/internal/engine/"
	"expired-hold-claim-in-use|ipam/internal/engine/allocate.go|s/byTime \&\& cur.State == StateReserved \&\& !cur.HoldExpired:/byTime \&\& cur.State == StateReserved:/|^TestExpireHold\$|./ipam/internal/engine/"
	"dropped-hold-not-own-cooling|ipam/internal/engine/allocate.go|s/\tif held != nil \x7c\x7c first.held == nil \x7c\x7c first.held.State != StateReserved \{/\tif true {/|^TestAnotherConfigurationGetsTheOwnersCoolingAddressBack\$|./ipam/internal/engine/"
	"set-key-loss-untold|ipam/internal/engine/set.go|s/\tif s.toReport\(lost\) \&\& !lost.ownerTaken \{/\tif false \&\& s.toReport(lost) \&\& !lost.ownerTaken {/|^TestASetKeysPlanIsToldOfItsLostHold\$|./ipam/internal/engine/"
	"plan-loss-read-once|ipam/internal/engine/hold.go|s/\tif held == nil \&\& req.lossLooked \{/\tif false \&\& held == nil \&\& req.lossLooked {/|^TestAPlanIsToldOfAHoldLostAfterItsFirstLook\$|./ipam/internal/engine/"
)

if $check_only; then
	dead=()
	for m in "${mutants[@]}"; do
		IFS='|' read -r name file subst _ _ <<<"$m"
		n=$(perl -0ne "\$n += ($subst); END { print \$n+0 }" "$file")
		[[ "$n" == 1 ]] || dead+=("$name ($file: $n matches)")
	done
	if ((${#dead[@]})); then
		printf 'mutants that no longer apply exactly once (the guard moved: point them at it):\n' >&2
		printf '  %s\n' "${dead[@]}" >&2
		exit 1
	fi
	echo "mutants: all ${#mutants[@]} apply"
	exit 0
fi

want=("$@")
work=$(mktemp -d "${TMPDIR:-/tmp}/ipam-mutants.XXXXXX")
trap 'rm -rf "$work"' EXIT

killed=() survived=() broken=()
for m in "${mutants[@]}"; do
	IFS='|' read -r name file subst rest <<<"$m"
	# The -run pattern may hold a | of its own: the package is the last field.
	run=${rest%|*} pkg=${rest##*|}
	if ((${#want[@]})) && [[ ! " ${want[*]} " == *" $name "* ]]; then
		continue
	fi
	dir="$work/$name"
	mkdir -p "$dir"
	tar -C "$root" --exclude=./.git --exclude=./.tools --exclude=./bin --exclude=./.demo -cf - . | tar -C "$dir" -xf -
	if ! perl -0pi -e "\$n += ($subst); END { exit(\$n == 1 ? 0 : 1) }" "$dir/$file"; then
		echo "mutant $name: the mutation no longer applies to $file" >&2
		broken+=("$name")
		continue
	fi
	printf '==> mutant %s (%s): go test -run %s %s\n' "$name" "$file" "$run" "$pkg" >&2
	if (cd "$dir" && go test -count=1 -run "$run" "$pkg" >"$dir.log" 2>&1); then
		survived+=("$name")
		echo "    survived" >&2
	elif grep -q -e '\[build failed\]' -e '\[setup failed\]' "$dir.log"; then
		# A mutant that does not compile kills nothing: no test ran.
		broken+=("$name")
		echo "    does not compile:" >&2
		{ grep -m 3 -e '\.go:[0-9]' -e 'setup failed' "$dir.log" || true; } | sed 's/^/      /' >&2
	elif grep -q -e 'which it does not use' -e 'no value for @' "$dir.log"; then
		# A mutation that removes a named parameter's only use fails every
		# call of its statement (the values no longer match its names):
		# killed by the binding, not by the rule it was meant to break.
		broken+=("$name")
		echo "    killed by its statement's parameters, not by the rule: keep the parameter in use" >&2
	else
		killed+=("$name")
		echo "    killed" >&2
	fi
	rm -rf "$dir"
done

echo
echo "killed (${#killed[@]}): ${killed[*]:-}"
echo "survived (${#survived[@]}): ${survived[*]:-}"
if ((${#broken[@]})); then
	echo "no longer apply, do not compile or break a statement's parameters (${#broken[@]}): ${broken[*]}"
fi
((${#survived[@]} == 0 && ${#broken[@]} == 0))
