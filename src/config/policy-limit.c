/* policy-limit: what a built policy says about one GPU (its limit, its
 * group's limit) and the GPU selectors it holds, by the precedence
 * policy.h lists. Thread safety: pure functions of a policy that is
 * read-only once built; no state of their own. */
#include "config/policy.h"

#include <stddef.h>
#include <stdint.h>

/* Of two matching rules, the one of lower order applies, the earlier on a
 * tie (a list's order). */
static unsigned order(const struct cumemcap_rule *r)
{
	return 2 * r->rank + (r->selector.kind == 0);
}

/* The limit or group rule that applies to this GPU, and where it came
 * from; UINT64_MAX when none does (a group's when there is no group). */
static uint64_t rule_limit(const struct cumemcap_policy *p, bool group, int ordinal, const unsigned char uuid[16],
			   const char *pci, uint64_t total, struct cumemcap_source *src)
{
	const struct cumemcap_rule *best = NULL;
	for (size_t i = 0; i < p->rule_count && (!group || p->group[0]); i++) {
		const struct cumemcap_rule *r = &p->rules[i];
		if (r->group == group && (!best || order(r) < order(best)) &&
		    (r->selector.kind == 0 || cumemcap_selector_matches(&r->selector, ordinal, uuid, pci)))
			best = r;
	}
	if (src)
		*src = best ? best->src : (struct cumemcap_source){ 0 };
	if (!best)
		return UINT64_MAX;
	return cumemcap_amount_bytes(&best->amount, total);
}

uint64_t cumemcap_policy_limit(const struct cumemcap_policy *p, int ordinal,
			       const unsigned char uuid[16], const char *pci_bus_id, uint64_t total,
			       struct cumemcap_source *src)
{
	return rule_limit(p, false, ordinal, uuid, pci_bus_id, total, src);
}

uint64_t cumemcap_policy_group_limit(const struct cumemcap_policy *p, int ordinal,
				     const unsigned char uuid[16], const char *pci_bus_id,
				     uint64_t total, struct cumemcap_source *src)
{
	return rule_limit(p, true, ordinal, uuid, pci_bus_id, total, src);
}

void cumemcap_policy_selectors(const struct cumemcap_policy *p,
			       void (*fn)(void *ctx, const struct cumemcap_selector *sel,
					  const struct cumemcap_source *src),
			       void *ctx)
{
	/* The lists by source, the group's while there is a group
	 * (CUMEMCAP_GROUP= turns off a file's group, its limit with it),
	 * then the [device] sections. */
	for (int group = 0; group < 2 && (!group || p->group[0]); group++)
		for (enum cumemcap_rank rank = 0; rank < CUMEMCAP_RANKS; rank++)
			for (size_t i = 0; rank != CUMEMCAP_RANK_DEVICE && i < p->rule_count; i++) {
				const struct cumemcap_rule *r = &p->rules[i];
				if (r->group == group && r->rank == rank && r->selector.kind != 0)
					fn(ctx, &r->selector, &r->src);
			}
	for (size_t i = 0; i < p->device_section_count; i++) {
		struct cumemcap_source s = { .origin = CUMEMCAP_FROM_FILE, .line = p->device_sections[i].line };
		fn(ctx, &p->device_sections[i].selector, &s);
	}
}

bool cumemcap_policy_any_limit(const struct cumemcap_policy *p)
{
	if (p->group[0])
		return true;
	for (size_t i = 0; i < p->rule_count; i++)
		if (!p->rules[i].group)
			return true;
	return false;
}
