-- CreateTable
CREATE TABLE "serve_instances" (
    "instance_id" TEXT NOT NULL,
    "host" TEXT NOT NULL,
    "pid" INTEGER NOT NULL,
    "version" TEXT NOT NULL,
    "address" TEXT NOT NULL,
    "started_at" TIMESTAMP(3) NOT NULL,
    "last_seen_at" TIMESTAMP(3) NOT NULL,
    "applied_revision" INTEGER,

    CONSTRAINT "serve_instances_pkey" PRIMARY KEY ("instance_id")
);
