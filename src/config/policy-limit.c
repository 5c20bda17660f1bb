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

/* A rule list's match for this GPU, with the rule's source. */
static bool layer_rule(const struct cumemcap_layer *l, int ordinal, const unsigned char uuid[16],
		       const char *pci, const struct cumemcap_amount **amount)
{
	if (!l->set.devices) /* a layer given (cumemcap_policy_gave) */
		return false;
	for (size_t i = 0; i < l->devices.count; i++) {
		if (cumemcap_selector_matches(&l->devices.rule[i].selector, ordinal, uuid, pci)) {
			*amount = &l->devices.rule[i].amount;
			return true;
		}
	}
	return false;
}

uint64_t cumemcap_policy_limit(const struct cumemcap_policy *p, int ordinal,
			       const unsigned char uuid[16], const char *pci_bus_id, uint64_t total,
			       struct cumemcap_source *src)
{
	const struct cumemcap_amount *amount = NULL;
	struct cumemcap_source from = { 0 };
	const struct cumemcap_layer *before_devices[] = { &p->env, &p->program_layer };

	for (size_t i = 0; i < 2 && !amount; i++) {
		const struct cumemcap_layer *l = before_devices[i];
		if (!cumemcap_policy_gave(p, l))
			continue;
		if (layer_rule(l, ordinal, uuid, pci_bus_id, &amount))
			from = l->src.devices;
		else if (l->set.limit) {
			amount = &l->limit;
			from = l->src.limit;
		}
	}
	for (size_t i = 0; i < p->device_section_count && !amount; i++) {
		const struct cumemcap_device_section *d = &p->device_sections[i];
		if (d->has_limit && cumemcap_selector_matches(&d->selector, ordinal, uuid, pci_bus_id)) {
			amount = &d->limit;
			from = (struct cumemcap_source){ .origin = CUMEMCAP_FROM_FILE, .line = d->limit_line };
		}
	}
	if (!amount && cumemcap_policy_gave(p, &p->file)) {
		if (layer_rule(&p->file, ordinal, uuid, pci_bus_id, &amount))
			from = p->file.src.devices;
		else if (p->file.set.limit) {
			amount = &p->file.limit;
			from = p->file.src.limit;
		}
	}
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
	const struct cumemcap_layer *order[] = { &p->env, &p->program_layer, &p->file };
	if (src)
		*src = (struct cumemcap_source){ 0 };
	if (!p->group[0])
		return UINT64_MAX;
	for (size_t i = 0; i < 3; i++) {
		const struct cumemcap_layer *l = order[i];
		if (!cumemcap_policy_gave(p, l) || !l->set.group_limit)
			continue;
		int matched = -1;
		uint64_t limit = cumemcap_resolve_limit(&l->group_limit, &l->group_rules, ordinal, uuid,
							pci_bus_id, total, &matched);
		/* A list that does not name this GPU leaves it to the next layer. */
		if (l->group_rules.count && matched < 0)
			continue;
		if (src)
			*src = l->src.group_limit;
		return limit;
	}
	return UINT64_MAX;
}

void cumemcap_policy_selectors(const struct cumemcap_policy *p,
			       void (*fn)(void *ctx, const struct cumemcap_selector *sel,
					  const struct cumemcap_source *src),
			       void *ctx)
{
	const struct cumemcap_layer *layers[] = { &p->env, &p->program_layer, &p->file };
	for (size_t i = 0; i < 3; i++)
		if (cumemcap_policy_gave(p, layers[i]) && layers[i]->set.devices)
			for (size_t r = 0; r < layers[i]->devices.count; r++)
				fn(ctx, &layers[i]->devices.rule[r].selector, &layers[i]->src.devices);
	/* A group's list, while there is a group (CUMEMCAP_GROUP= turns off
	 * a file's group, its limit with it). */
	for (size_t i = 0; i < 3 && p->group[0]; i++)
		if (cumemcap_policy_gave(p, layers[i]) && layers[i]->set.group_limit)
			for (size_t r = 0; r < layers[i]->group_rules.count; r++)
				fn(ctx, &layers[i]->group_rules.rule[r].selector, &layers[i]->src.group_limit);
	for (size_t i = 0; i < p->device_section_count; i++) {
		struct cumemcap_source s = { .origin = CUMEMCAP_FROM_FILE, .line = p->device_sections[i].line };
		fn(ctx, &p->device_sections[i].selector, &s);
	}
}

bool cumemcap_policy_any_limit(const struct cumemcap_policy *p)
{
	if (p->group[0])
		return true;
	const struct cumemcap_layer *layers[] = { &p->env, &p->program_layer, &p->file };
	for (size_t i = 0; i < 3; i++)
		if (cumemcap_policy_gave(p, layers[i]) && (layers[i]->set.limit || layers[i]->set.devices))
			return true;
	for (size_t i = 0; i < p->device_section_count; i++)
		if (p->device_sections[i].has_limit)
			return true;
	return false;
}
