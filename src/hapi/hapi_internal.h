/* Shared between the Model and its callbacks (not public). */
#ifndef PADDLEC_HAPI_INTERNAL_H
#define PADDLEC_HAPI_INTERNAL_H

#include "paddlec.h"

/* The built-in callbacks, recognised by config_callbacks. */
extern const pd_callback_fns pd_callback_prog_bar_logger_fns;
extern const pd_callback_fns pd_callback_model_checkpoint_fns;
extern const pd_callback_fns pd_callback_early_stopping_fns;
extern const pd_callback_fns pd_callback_lr_scheduler_fns;

/* config_callbacks hands its save_dir to ModelCheckpoint / EarlyStopping
 * (copied; NULL clears it). */
pd_status pd_callback_set_save_dir(pd_callback *cb, const char *save_dir);

#endif
