/* rtld-next-b: the definition RTLD_NEXT from rtld-next-a must find. */
int next_probe(void);
int rtld_next_b_loaded(void);

int next_probe(void)
{
	return 2;
}

/* Referenced by the program so the linker keeps this library. */
int rtld_next_b_loaded(void)
{
	return 1;
}
