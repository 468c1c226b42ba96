/* schema.h — what schema.c (JSON Schema -> GBNF) shares with
 * schema_oneof.c (the proof that oneOf's branches are disjoint). Private
 * to the grammar folder; the schemas are jansson values owned by the
 * caller. */
#ifndef CMF_GRAMMAR_SCHEMA_H
#define CMF_GRAMMAR_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>

/* The value a "#..." JSON pointer names inside root, or NULL (a remote
 * reference, or a path that names nothing). */
const json_t *cmf__schema_pointer(const json_t *root, const char *ref);

/* The type a schema without "type" is compiled as, from its keywords
 * ("object" for properties, "array" for items, ...), or NULL: any value. */
const char *cmf__schema_implied_type(const json_t *s);

/* Whether no JSON value can match both a and b, proven cheaply and
 * soundly: every value the grammar compiled from a can write fails b (as a
 * JSON Schema validator reads b, format and pattern aside), and the other
 * way round. false means "not proven", never "they overlap". a and b are
 * schemas inside root (their $refs are resolved there) that schema.c has
 * compiled without error. Each step of the proof takes one of *steps; at
 * 0, the answer is false. */
bool cmf__schema_disjoint(const json_t *root, const json_t *a, const json_t *b, long *steps);

#endif
