/* An out-of-tree program that uses an installed paddle.c. */
#include <paddlec.h>
#include <stdio.h>

int main(void) {
  pd_tensor *a = pd_full(2, (int64_t[]){2, 2}, 1.5, PD_FLOAT32);
  pd_tensor *b = pd_add(a, a);
  int ok = b && pd_tensor_item_at(b, 3) == 3.0;
  printf("consumer: %s\n", ok ? "ok" : pd_last_error());
  pd_tensor_release(a);
  pd_tensor_release(b);
  return ok ? 0 : 1;
}
