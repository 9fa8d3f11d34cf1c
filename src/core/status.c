/* Names and one-line descriptions of the pd_status codes. */
#include "paddlec/core.h"

/* Switches over the enum without a default: -Wswitch (in -Wall, an error
 * with -Werror) then reports a status added to core.h but not named here. */
const char *pd_status_name(pd_status code) {
  switch (code) {
    case PD_OK:
      return "PD_OK";
    case PD_ERR_INVALID:
      return "PD_ERR_INVALID";
    case PD_ERR_SHAPE:
      return "PD_ERR_SHAPE";
    case PD_ERR_DTYPE:
      return "PD_ERR_DTYPE";
    case PD_ERR_INDEX:
      return "PD_ERR_INDEX";
    case PD_ERR_MEMORY:
      return "PD_ERR_MEMORY";
    case PD_ERR_STATE:
      return "PD_ERR_STATE";
    case PD_ERR_IO:
      return "PD_ERR_IO";
    case PD_ERR_UNIMPLEMENTED:
      return "PD_ERR_UNIMPLEMENTED";
    case PD_ERR_COMM:
      return "PD_ERR_COMM";
  }
  return "PD_ERR_UNKNOWN";
}

const char *pd_status_string(pd_status code) {
  switch (code) {
    case PD_OK:
      return "not an error";
    case PD_ERR_INVALID:
      return "invalid argument";
    case PD_ERR_SHAPE:
      return "incompatible shapes";
    case PD_ERR_DTYPE:
      return "unsupported data type";
    case PD_ERR_INDEX:
      return "axis or index out of range";
    case PD_ERR_MEMORY:
      return "out of memory";
    case PD_ERR_STATE:
      return "operation not allowed in the current state";
    case PD_ERR_IO:
      return "file or network failure";
    case PD_ERR_UNIMPLEMENTED:
      return "not implemented";
    case PD_ERR_COMM:
      return "collective communication failure";
  }
  return "unknown status code";
}
