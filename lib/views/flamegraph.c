/* SPDX-License-Identifier: MIT */
/*
 * The SVG flame graph writer (views/flamegraph.h).
 */
#include "views/flamegraph.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define TITLE_H 44.0
#define CHAR_W 7.0

/* @s as XML character data: markup characters as entities, control bytes
 * as '?', bytes above 0x7f as the Latin-1 character of the byte (so any
 * name gives well-formed XML); at most @max bytes of it. */
static void put_xml(FILE *f, const char *s, size_t max)
{
	for (size_t i = 0; s[i] && i < max; i++) {
		unsigned char c = (unsigned char)s[i];

		switch (c) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&apos;", f);
			break;
		default:
			if (c < 0x20 || c == 0x7f)
				fputc('?', f);
			else if (c > 0x7f)
				fprintf(f, "&#x%02x;", c);
			else
				fputc(c, f);
		}
	}
}

/* A warm colour from the name, the same for the same name. */
static void color_of(const char *name, unsigned rgb[3])
{
	uint32_t h = 2166136261u;

	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	rgb[0] = 205 + h % 50;
	rgb[1] = (h >> 8) % 230;
	rgb[2] = (h >> 16) % 55;
}

struct item {
	uint32_t node;
	double x;
};

int ptd_flamegraph_write(FILE *f, const struct ptd_stacks *s,
			 const struct ptd_flamegraph_opts *o)
{
	const struct ptd_stack_node *root = ptd_stacks_node(s, 0);
	size_t nn = ptd_stacks_nnodes(s), top = 0;
	double width = o && o->width > 0 ? o->width : 1200.0;
	double minw = o ? o->min_width : 0;
	double scale, height, base;
	uint32_t maxdepth = 0;
	struct item *st;

	if (!root)
		return -EINVAL;
	for (uint32_t i = 0; i < nn; i++)
		if (ptd_stacks_node(s, i)->depth > maxdepth)
			maxdepth = ptd_stacks_node(s, i)->depth;
	scale = root->total ? (width - 2 * PTD_FLAMEGRAPH_PAD) /
				      (double)root->total
			    : 0;
	height = TITLE_H + (maxdepth + 1) * PTD_FLAMEGRAPH_FRAME_H +
		 2 * PTD_FLAMEGRAPH_PAD;
	/* the y of depth 0 (the root's row) */
	base = height - PTD_FLAMEGRAPH_PAD - PTD_FLAMEGRAPH_FRAME_H;
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" "
		"width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n"
		"<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" "
		"fill=\"#f8f4ee\"/>\n"
		"<style>text{font-family:monospace;font-size:12px;"
		"pointer-events:none}</style>\n"
		"<text x=\"%.1f\" y=\"22\" text-anchor=\"middle\" "
		"style=\"font-size:16px\">",
		width, height, width, height, width, height, width / 2);
	put_xml(f, o && o->title ? o->title : "Instructions by stack", 4096);
	fprintf(f, "</text>\n<text x=\"%.1f\" y=\"38\" "
		   "text-anchor=\"middle\">",
		width / 2);
	fprintf(f, "%" PRIu64 " instructions; widths are exact instruction "
		   "counts",
		root->total);
	if (o && o->subtitle) {
		fputs("; ", f);
		put_xml(f, o->subtitle, 4096);
	}
	fputs("</text>\n", f);
	st = calloc(nn, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st[top++] = (struct item){ 0, PTD_FLAMEGRAPH_PAD };
	while (top) {
		struct item it = st[--top];
		const struct ptd_stack_node *nd = ptd_stacks_node(s, it.node);
		double w = (double)nd->total * scale;
		double y = base - nd->depth * PTD_FLAMEGRAPH_FRAME_H;
		double x = it.x;
		unsigned rgb[3];
		size_t chars;

		if (!nd->total || w < minw)
			continue;
		color_of(nd->name, rgb);
		fputs("<g><title>", f);
		put_xml(f, nd->name, PTD_STACKS_MAX_NAME);
		fprintf(f, " (%" PRIu64 " instructions, %.2f%%)</title>"
			   "<rect x=\"%.4f\" y=\"%.1f\" width=\"%.4f\" "
			   "height=\"%.1f\" fill=\"rgb(%u,%u,%u)\" rx=\"2\"/>",
			nd->total, 100.0 * (double)nd->total / (double)root->total,
			x, y, w, PTD_FLAMEGRAPH_FRAME_H - 1, rgb[0], rgb[1],
			rgb[2]);
		chars = (size_t)((w - 6) / CHAR_W);
		if (chars >= 3) {
			size_t len = strlen(nd->name);

			fprintf(f, "<text x=\"%.2f\" y=\"%.1f\">", x + 3,
				y + PTD_FLAMEGRAPH_FRAME_H - 4.5);
			if (len <= chars) {
				put_xml(f, nd->name, len);
			} else {
				put_xml(f, nd->name, chars - 2);
				fputs("..", f);
			}
			fputs("</text>", f);
		}
		fputs("</g>\n", f);
		for (uint32_t c = nd->child; c;
		     c = ptd_stacks_node(s, c)->next) {
			st[top++] = (struct item){ c, x };
			x += (double)ptd_stacks_node(s, c)->total * scale;
		}
	}
	free(st);
	fputs("</svg>\n", f);
	return ferror(f) ? -EIO : 0;
}
