-- AlterTable
ALTER TABLE "audit_events" ADD COLUMN "principal" TEXT;
ALTER TABLE "audit_events" ADD COLUMN "principal_verified" BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE "audit_events" ADD COLUMN "seq" INTEGER;
ALTER TABLE "audit_events" ADD COLUMN "prev_hash" TEXT;
ALTER TABLE "audit_events" ADD COLUMN "hash" TEXT;

-- CreateTable
CREATE TABLE "audit_chain" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "started_at" DATETIME NOT NULL,
    "legacy_through" INTEGER NOT NULL
);

-- Where the chain starts: the events already written are chained by the migration runner right after this
-- migration (src/db/migrate.ts), and the chain vouches for them from now on.
INSERT INTO "audit_chain" ("id", "started_at", "legacy_through") SELECT 1, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'), COALESCE(MAX("id"), 0) FROM "audit_events";
