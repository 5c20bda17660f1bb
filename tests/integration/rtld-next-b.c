/* rtld-next-b: the definition RTLD_NEXT from rtld-next-a must find. */
int next_probe(void);

int next_probe(void)
{
	return 2;
}
