-- CreateTable
CREATE TABLE "serve_instances" (
    "instance_id" TEXT NOT NULL PRIMARY KEY,
    "host" TEXT NOT NULL,
    "pid" INTEGER NOT NULL,
    "version" TEXT NOT NULL,
    "address" TEXT NOT NULL,
    "started_at" DATETIME NOT NULL,
    "last_seen_at" DATETIME NOT NULL,
    "applied_revision" INTEGER
);
