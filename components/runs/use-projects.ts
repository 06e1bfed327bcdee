"use client";

import { useQuery } from "@tanstack/react-query";
import { apiGet, runKeys, type Project } from "./api";

export function useProjects() {
  return useQuery({
    queryKey: runKeys.projects,
    queryFn: () => apiGet<{ projects: Project[] }>("/api/projects").then((b) => b.projects),
    staleTime: 10_000,
  });
}
