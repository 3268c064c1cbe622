-- 0004: a flag from the server's own output check consumes its ticket
-- (issue 23).
--
-- A report entry whose samples the server recomputes and finds wrong flags
-- the kernel for the device without storing a measurement, so before this
-- migration nothing stopped the same ticket from flagging again and again.
-- The ticket is now stored with the flag and is unique across flags; a
-- ticket already quoted by a measurement, or by another flag, is refused
-- (`DbError::TicketReused`). Flags of the client's own check (`output_ok`
-- false) come with their measurement, whose ticket column is already
-- unique, so they leave this column NULL (NULLs never collide).
ALTER TABLE flags ADD COLUMN ticket TEXT;
CREATE UNIQUE INDEX flags_by_ticket ON flags (ticket);
