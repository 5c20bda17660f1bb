/* policy-limit: what a built policy says about one GPU — its limit and
 * where that came from (cumemcap_policy_limit), its group's limit
 * (cumemcap_policy_group_limit), and every GPU selector the policy holds
 * (cumemcap_policy_selectors), in the precedence policy.h lists. Building
 * the policy is policy.c's.
 *
 * Thread safety: pure functions of a policy that is read-only once built
 * (see policy.h); they keep no state of their own. */
#include "config/policy.h"

#include <stddef.h>
#include <stdint.h>

static bool given(const struct cumemcap_source *src)
{
	return src->origin != CUMEMCAP_FROM_DEFAULT;
}

/* The limit a source gives this GPU: the first rule of its device_limits
 * that names it, else its limit; NULL when it gives neither. */
static const struct cumemcap_amount *source_limit(const struct cumemcap_policy *p, enum cumemcap_rank rank,
						  int ordinal, const unsigned char uuid[16], const char *pci,
						  struct cumemcap_source *from)
{
	const struct cumemcap_limits *l = &p->limits[rank];
	const struct cumemcap_device_rules *rules = &p->devices[rank];
	for (size_t i = 0; given(&l->devices_src) && i < rules->count; i++) {
		if (cumemcap_selector_matches(&rules->rule[i].selector, ordinal, uuid, pci)) {
			*from = l->devices_src;
			return &rules->rule[i].amount;
		}
	}
	if (!given(&l->limit_src))
		return NULL;
	*from = l->limit_src;
	return &l->limit;
}

uint64_t cumemcap_policy_limit(const struct cumemcap_policy *p, int ordinal,
			       const unsigned char uuid[16], const char *pci_bus_id, uint64_t total,
			       struct cumemcap_source *src)
{
	struct cumemcap_source from = { 0 };
	const struct cumemcap_amount *amount =
		source_limit(p, CUMEMCAP_RANK_ENV, ordinal, uuid, pci_bus_id, &from);
	if (!amount)
		amount = source_limit(p, CUMEMCAP_RANK_PROGRAM, ordinal, uuid, pci_bus_id, &from);
	for (size_t i = 0; i < p->device_section_count && !amount; i++) {
		const struct cumemcap_device_section *d = &p->device_sections[i];
		if (d->has_limit && cumemcap_selector_matches(&d->selector, ordinal, uuid, pci_bus_id)) {
			amount = &d->limit;
			from = (struct cumemcap_source){ .origin = CUMEMCAP_FROM_FILE, .line = d->limit_line };
		}
	}
	if (!amount)
		amount = source_limit(p, CUMEMCAP_RANK_GLOBAL, ordinal, uuid, pci_bus_id, &from);
	if (src)
		*src = from;
	if (!amount)
		return UINT64_MAX;
	return cumemcap_resolve_limit(amount, NULL, ordinal, uuid, pci_bus_id, total, NULL);
}

uint64_t cumemcap_policy_group_limit(const struct cumemcap_policy *p, int ordinal,
				     const unsigned char uuid[16], const char *pci_bus_id,
				     uint64_t total, struct cumemcap_source *src)
{
	if (src)
		*src = (struct cumemcap_source){ 0 };
	if (!p->group[0])
		return UINT64_MAX;
	for (size_t i = 0; i < CUMEMCAP_RANKS; i++) {
		const struct cumemcap_limits *l = &p->limits[i];
		if (!given(&l->group_limit_src))
			continue;
		int matched = -1;
		uint64_t limit = cumemcap_resolve_limit(&l->group_limit, &p->group_rules[i], ordinal, uuid,
							pci_bus_id, total, &matched);
		/* A list that does not name this GPU leaves it to the next source. */
		if (p->group_rules[i].count && matched < 0)
			continue;
		if (src)
			*src = l->group_limit_src;
		return limit;
	}
	return UINT64_MAX;
}

void cumemcap_policy_selectors(const struct cumemcap_policy *p,
			       void (*fn)(void *ctx, const struct cumemcap_selector *sel,
					  const struct cumemcap_source *src),
			       void *ctx)
{
	for (size_t i = 0; i < CUMEMCAP_RANKS; i++)
		for (size_t r = 0; given(&p->limits[i].devices_src) && r < p->devices[i].count; r++)
			fn(ctx, &p->devices[i].rule[r].selector, &p->limits[i].devices_src);
	/* A group's list, while there is a group (CUMEMCAP_GROUP= turns off
	 * a file's group, its limit with it). */
	for (size_t i = 0; i < CUMEMCAP_RANKS && p->group[0]; i++)
		for (size_t r = 0; given(&p->limits[i].group_limit_src) && r < p->group_rules[i].count; r++)
			fn(ctx, &p->group_rules[i].rule[r].selector, &p->limits[i].group_limit_src);
	for (size_t i = 0; i < p->device_section_count; i++) {
		struct cumemcap_source s = { .origin = CUMEMCAP_FROM_FILE, .line = p->device_sections[i].line };
		fn(ctx, &p->device_sections[i].selector, &s);
	}
}

bool cumemcap_policy_any_limit(const struct cumemcap_policy *p)
{
	if (p->group[0])
		return true;
	for (size_t i = 0; i < CUMEMCAP_RANKS; i++)
		if (given(&p->limits[i].limit_src) || given(&p->limits[i].devices_src))
			return true;
	for (size_t i = 0; i < p->device_section_count; i++)
		if (p->device_sections[i].has_limit)
			return true;
	return false;
}
