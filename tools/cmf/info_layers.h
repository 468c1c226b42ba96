/* info_layers.h — MoE block and layer schedule for `cmf info`. */
#ifndef CMF_TOOL_INFO_LAYERS_H
#define CMF_TOOL_INFO_LAYERS_H

#include "format/format.h"

#include <jansson.h>

/* One object per layer (type, attention or linear-attention dims, FFN kind
 * from the directory); JSON null when the header has no usable arch. */
json_t *info_layer_schedule(const cmf__file *f);

/* The `moe:` line and the `layers:` table of the text output. */
void info_print_layers(const json_t *arch, const json_t *schedule);

#endif
