-- Whether a device was made slim (iOS background services disabled at its
-- boots for a lease), part of what the device is: a slim request is served
-- by a slim device and a full one never is. '' is a full device. slimmed
-- is whether its slim pass is in effect now (a clean's erase undoes it).
ALTER TABLE devices ADD COLUMN mode TEXT NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN slimmed INTEGER NOT NULL DEFAULT 0;
