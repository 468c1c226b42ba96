/* info_layers.h — MoE block and layer schedule for `cmf info`. */
#ifndef CMF_TOOL_INFO_LAYERS_H
#define CMF_TOOL_INFO_LAYERS_H

#include "format/format.h"
#include "model/arch.h"

#include <jansson.h>

/* One object per layer (type, attention or linear-attention dims, FFN kind
 * from the directory); JSON null when `a` is NULL (no valid arch block). */
json_t *info_layer_schedule(const cmf__file *f, const cmf__arch *a);

/* The `moe:` line and the `layers:` table of the text output (`a` NULL:
 * no moe line). */
void info_print_layers(const cmf__arch *a, const json_t *schedule);

#endif
