/* An out-of-tree program that uses an installed paddle.c. */
#include <paddlec.h>
#include <paddlec/hapi.h> /* the deprecated header still builds, after paddlec.h */
#include <stdio.h>
#include <string.h>

int main(void) {
  pd_tensor *a = pd_full(2, (int64_t[]){2, 2}, 1.5, PD_FLOAT32);
  pd_tensor *b = pd_add(a, a);
  pd_string_map meta = {0};
  const char *v =
      pd_string_map_set(&meta, "format", "paddle.c") == PD_OK ? pd_string_map_get(&meta, "format") : NULL;
  int ok = b && pd_tensor_item_at(b, 3) == 3.0 && v && strcmp(v, "paddle.c") == 0;
  printf("consumer: %s\n", ok ? "ok" : pd_last_error());
  pd_tensor_release(a);
  pd_tensor_release(b);
  pd_string_map_free(&meta);
  return ok ? 0 : 1;
}
