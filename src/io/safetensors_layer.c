/* layer.state_dict() to and from safetensors files. */
#include <stdlib.h>
#include <string.h>

#include "checkpoint_internal.h"

pd_status pd_layer_save(const pd_layer *layer, const char *path) {
  if (!layer) return pd_set_error(PD_ERR_INVALID, "layer_save: layer is NULL");
  pd_named_tensors sd;
  pd_status st = pd_layer_state_dict(layer, &sd);
  if (st != PD_OK) return st;
  pd_string_map meta = {0};
  st = pd_string_map_set(&meta, "kind", "layer");
  if (st == PD_OK) st = pd_save_with_metadata(&sd, path, &meta);
  pd_string_map_free(&meta);
  pd_named_tensors_free(&sd);
  return st;
}

/* Appends up to 16 names of a list to `sb`. */
static void list_names(pd_strbuf *sb, const char *label, const pd_named_tensors *l) {
  if (l->n == 0) return;
  pd_sb_printf(sb, "%s%s: ", sb->len ? "; " : "", label);
  for (int i = 0; i < l->n && i < 16; i++) pd_sb_printf(sb, "%s'%s'", i ? ", " : "", l->names[i]);
  if (l->n > 16) pd_sb_printf(sb, " and %d more", l->n - 16);
}

pd_status pd_layer_load(pd_layer *layer, const char *path, bool strict) {
  if (!layer) return pd_set_error(PD_ERR_INVALID, "layer_load: layer is NULL");
  pd_named_tensors file;
  pd_status st = pd_load(path, &file);
  if (st != PD_OK) return st;
  if (strict) {
    pd_named_tensors missing, unexpected;
    st = pd_layer_match_state_dict(layer, &file, &missing, &unexpected);
    if (st == PD_OK && (missing.n || unexpected.n)) {
      pd_strbuf sb = {0};
      list_names(&sb, "missing keys", &missing);
      list_names(&sb, "unexpected keys", &unexpected);
      st = pd_set_error(PD_ERR_INVALID, "layer_load: '%s' does not match the layer (%s): %s", path,
                        pd_layer_full_name(layer), sb.s ? sb.s : "out of memory");
      free(sb.s);
    }
    pd_named_tensors_free(&missing);
    pd_named_tensors_free(&unexpected);
  }
  if (st == PD_OK) {
    st = pd_layer_set_state_dict(layer, &file, NULL, NULL);
    if (st != PD_OK) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", pd_last_error());
      st = pd_set_error(st, "layer_load: '%s': %s", path, msg);
    }
  }
  pd_state_free(&file);
  return st;
}
