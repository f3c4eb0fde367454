/* SPDX-License-Identifier: MIT */
/*
 * The tree of stacks (views/stacks.h) as an SVG flame graph of exact
 * instruction counts: one frame per node, its width proportional to the
 * instructions that ran in its stack and above it, the root ("all") at
 * the bottom, children left to right by name.  Self-contained (no
 * script, no external reference); each frame is a <g> holding a <title>
 * (shown on hover: "NAME (N instructions, P%)"), a <rect> and, where it
 * fits, a <text>, written parents before children (doc/views.md).
 */
#ifndef PTD_VIEWS_FLAMEGRAPH_H
#define PTD_VIEWS_FLAMEGRAPH_H

#include <stdio.h>

#include "views/stacks.h"

struct ptd_flamegraph_opts {
	const char *title;	/* NULL: "Instructions by stack" */
	const char *subtitle;	/* NULL: none */
	double width;		/* of the image, px; 0: 1200 */
	/* Frames narrower than this (px) are left out with what is above
	 * them; 0: every frame with an instruction. */
	double min_width;
};

/* Geometry the writer uses (tests measure frames with it). */
#define PTD_FLAMEGRAPH_PAD 10.0
#define PTD_FLAMEGRAPH_FRAME_H 16.0

/* Write the tree of @s (after ptd_stacks_finish) to @f.  Returns 0,
 * -ENOMEM, or -EIO when @f failed. */
int ptd_flamegraph_write(FILE *f, const struct ptd_stacks *s,
			 const struct ptd_flamegraph_opts *o);

#endif
