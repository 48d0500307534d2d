-- The Android system image tag a device was made from (google_apis,
-- google_apis_playstore, …), part of what the device is: a request for
-- one tag is never served by a device of another. '' where there is none.
ALTER TABLE devices ADD COLUMN image_tag TEXT NOT NULL DEFAULT '';
