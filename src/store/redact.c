/*
 * redact.c — a store string fit to print (db.h): the password of a URI
 * shown as ***. Apart from db.c because every backend prints its target
 * and db.c's table names every backend: one file each way, no loop.
 */
#include "store/db.h"

#include <string.h>

#include "util/util.h"

char *db_redact(const char *target)
{
	struct strbuf sb = STRBUF_INIT;
	const char *p = target, *scheme = strstr(target, "://");
	if (scheme) {
		/* the authority: up to the first '/', '?' or '#' after "://" */
		const char *auth = scheme + 3, *end = auth + strcspn(auth, "/?#");
		const char *at = NULL;
		for (const char *q = auth; q < end; q++)
			if (*q == '@')
				at = q;
		const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
		if (colon) {
			strbuf_add(&sb, target, (size_t)(colon + 1 - target));
			strbuf_addstr(&sb, "***");
			p = at;
		}
	}
	/* password=VALUE anywhere (a URI's query, a key=value string) */
	for (const char *q; (q = strcasestr(p, "password=")); ) {
		q += 9;
		strbuf_add(&sb, p, (size_t)(q - p));
		strbuf_addstr(&sb, "***");
		p = q + strcspn(q, "& ");
	}
	strbuf_addstr(&sb, p);
	char *r = strbuf_detach(&sb, NULL);
	return r ? r : xstrdup("");
}
