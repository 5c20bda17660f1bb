/* bench: startup-empty, a library with nothing in it, preloaded by the
 * startup benchmark as the floor of what any LD_PRELOAD costs. */
int cumemcap_startup_empty(void);
int cumemcap_startup_empty(void)
{
	return 0;
}
