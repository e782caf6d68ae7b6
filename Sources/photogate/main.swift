print("photogate")
