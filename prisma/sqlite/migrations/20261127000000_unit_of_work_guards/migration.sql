-- AlterTable
ALTER TABLE "webhook_events" ADD COLUMN "audit_seq" INTEGER;

-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_revision" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "value" BIGINT NOT NULL DEFAULT 0
);
INSERT INTO "new_revision" ("id", "value") SELECT "id", "value" FROM "revision";
DROP TABLE "revision";
ALTER TABLE "new_revision" RENAME TO "revision";
CREATE TABLE "new_serve_instances" (
    "instance_id" TEXT NOT NULL PRIMARY KEY,
    "host" TEXT NOT NULL,
    "pid" INTEGER NOT NULL,
    "version" TEXT NOT NULL,
    "address" TEXT NOT NULL,
    "started_at" DATETIME NOT NULL,
    "last_seen_at" DATETIME NOT NULL,
    "applied_revision" BIGINT
);
INSERT INTO "new_serve_instances" ("address", "applied_revision", "host", "instance_id", "last_seen_at", "pid", "started_at", "version") SELECT "address", "applied_revision", "host", "instance_id", "last_seen_at", "pid", "started_at", "version" FROM "serve_instances";
DROP TABLE "serve_instances";
ALTER TABLE "new_serve_instances" RENAME TO "serve_instances";
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

-- CreateIndex
CREATE INDEX "audit_events_seq_idx" ON "audit_events"("seq");

-- CreateIndex
CREATE UNIQUE INDEX "webhook_events_audit_seq_key" ON "webhook_events"("audit_seq");
